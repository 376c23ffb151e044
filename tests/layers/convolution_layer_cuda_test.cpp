// Convolution and Deconvolution layers on the GPU against the CPU (check_cuda_parity: tops,
// bottom gradients and parameter gradients) for every option on awkward shapes, frozen
// parameters, and PyTorch's numbers on the GPU.
#include <gtest/gtest.h>

#include <string>

#include "tests/fixtures/conv_fixture.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

const std::string kConv =
    "{name: c, type: Convolution, bias_filler: {type: uniform, min: -1, max: 1}, ";
const std::string kDeconv =
    "{name: d, type: Deconvolution, bias_filler: {type: uniform, min: -1, max: 1}, ";

TEST(ConvolutionLayerCuda, MatchesCpuLeNetShapes) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kConv + "num_output: 20, kernel_size: 5}", {{3, 1, 28, 28}});
  check_cuda_parity(kConv + "num_output: 50, kernel_size: 5}", {{3, 20, 12, 12}});
}

TEST(ConvolutionLayerCuda, MatchesCpuRectangularStridePadDilation) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kConv +
                        "num_output: 5, kernel_h: 3, kernel_w: 2, stride_h: 2, stride_w: 1,"
                        " pad_h: 1, pad_w: 2}",
                    {{2, 3, 9, 7}});
  check_cuda_parity(kConv +
                        "num_output: 7, kernel_size: [3, 5], stride: [1, 2], pad: [2, 1],"
                        " dilation: [2, 1]}",
                    {{1, 5, 11, 13}});
}

TEST(ConvolutionLayerCuda, MatchesCpuGroupsAndDepthwise) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kConv + "num_output: 6, kernel_size: 3, pad: 1, group: 3}", {{2, 9, 7, 6}});
  check_cuda_parity(kConv + "num_output: 8, kernel_size: 3, stride: 2, pad: 1, group: 8}",
                    {{3, 8, 11, 9}});
  check_cuda_parity(kConv +
                        "num_output: 10, kernel_size: [5, 3], dilation: 2, pad: [4, 2],"
                        " group: 5, bias_term: false}",
                    {{2, 5, 9, 10}});
}

TEST(ConvolutionLayerCuda, MatchesCpuPointwise) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kConv + "num_output: 12, kernel_size: 1}", {{3, 8, 5, 7}});
  check_cuda_parity(kConv + "num_output: 6, kernel_size: 1, group: 2, bias_term: false}",
                    {{2, 4, 4, 4}});
  check_cuda_parity(kConv + "num_output: 3, kernel_size: 1, stride: 2}", {{2, 5, 7, 6}});
}

TEST(ConvolutionLayerCuda, MatchesCpuFrozenParameters) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kConv + "num_output: 4, kernel_size: 3, param: {weight: {lr_mult: 0}}}",
                    {{2, 3, 6, 5}});
  check_cuda_parity(kConv + "num_output: 4, kernel_size: 3, param: {bias: {lr_mult: 0}}}",
                    {{2, 3, 6, 5}});
}

TEST(ConvolutionLayerCuda, GoldenMatchesPyTorch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  check_against_golden(ctx, "conv_grouped",
                       "{name: c, type: Convolution, num_output: 6, kernel_size: 3, pad: 1,"
                       " group: 2}");
  check_against_golden(ctx, "conv_dilated",
                       "{name: c, type: Convolution, num_output: 4, kernel_h: 3, kernel_w: 2,"
                       " stride: [2, 1], pad: [2, 1], dilation: [2, 3]}");
  check_against_golden(ctx, "conv_depthwise",
                       "{name: c, type: Convolution, num_output: 6, kernel_size: 3, stride: 2,"
                       " pad: 1, group: 3}");
}

TEST(DeconvolutionLayerCuda, MatchesCpuStridePadOutputPadding) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kDeconv +
                        "num_output: 5, kernel_size: 3, stride: 2, pad: 1,"
                        " output_padding: 1}",
                    {{2, 3, 5, 4}});
  check_cuda_parity(kDeconv + "num_output: 40, kernel_size: 4, stride: 2, pad: 1}",
                    {{2, 36, 5, 5}});  // more than 32 channels per group: v2's backward data
}

TEST(DeconvolutionLayerCuda, MatchesCpuGroupsDilationDepthwise) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kDeconv +
                        "num_output: 6, kernel_size: [3, 2], stride: [2, 3], pad: [1, 0],"
                        " dilation: [1, 2], group: 2}",
                    {{1, 4, 4, 5}});
  check_cuda_parity(kDeconv +
                        "num_output: 7, kernel_size: 4, stride: 2, pad: 1, group: 7,"
                        " bias_term: false}",
                    {{2, 7, 6, 5}});
  check_cuda_parity(kDeconv + "num_output: 9, kernel_size: 1}", {{2, 4, 5, 3}});
}

TEST(DeconvolutionLayerCuda, MatchesCpuFrozenWeight) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(kDeconv +
                        "num_output: 3, kernel_size: 3, stride: 2,"
                        " param: {weight: {lr_mult: 0}}}",
                    {{2, 2, 4, 3}});
}

TEST(DeconvolutionLayerCuda, GoldenMatchesPyTorch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  check_against_golden(ctx, "deconv_stride_pad",
                       "{name: d, type: Deconvolution, num_output: 4, kernel_size: 3, stride: 2,"
                       " pad: 1, output_padding: 1}");
  check_against_golden(ctx, "deconv_grouped_dilated",
                       "{name: d, type: Deconvolution, num_output: 6, kernel_size: [3, 2],"
                       " stride: [2, 3], pad: [1, 0], dilation: [1, 2], group: 2}");
}

}  // namespace
}  // namespace crema::testing
