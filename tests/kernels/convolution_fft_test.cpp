// FFT convolution (v10): which geometries it takes, its name, and its arithmetic; plain host code,
// so these run without a GPU.
#include <gtest/gtest.h>

#include <optional>

#include "kernels/convolution/convolution.h"

namespace crema::kernels {
namespace {

constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

// Stride 1, dilation 1, no groups, padded maps of at most 64 x 64 (one F x F transform, F <= 64),
// every pass; anything else is refused.
TEST(ConvolutionFft, SupportsStrideOneUngroupedMapsUpTo64) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  const ConvAlgorithm& fft = *conv_algorithm_named("fft");
  // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
  const Conv2dGeometry taken[] = {
      {1, 3, 7, 9, 5, 3, 3, 1, 1},  {2, 5, 6, 11, 7, 1, 1},        {1, 6, 5, 7, 10, 5, 5, 2, 2},
      {2, 3, 9, 13, 6, 7, 7, 3, 3}, {2, 4, 62, 60, 3, 3, 3, 1, 2},  // 64 x 64 padded: F = 64
      {1, 3, 8, 64, 5, 1, 1},                                       // 64 wide, no padding
      {1, 1, 1, 1, 1, 1, 1},
  };
  for (const Conv2dGeometry& g : taken) {
    for (ConvPass pass : kPasses) EXPECT_TRUE(fft.supports(pass, g)) << g.H << "x" << g.W;
  }
  const Conv2dGeometry refused[] = {
      {1, 3, 16, 16, 5, 3, 3, 1, 1, 2, 2},           // stride 2
      {1, 3, 16, 16, 5, 3, 3, 1, 1, 1, 2},           // stride 2 along the width only
      {1, 3, 16, 16, 5, 3, 3, 2, 2, 1, 1, 2, 2},     // dilation 2
      {1, 4, 16, 16, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups
      {1, 3, 63, 63, 5, 3, 3, 1, 1},                 // 65 x 65 padded
      {1, 3, 8, 60, 5, 3, 3, 0, 3},                  // 66 wide padded
      {1, 3, 65, 8, 5, 1, 1},                        // 65 high
  };
  for (const Conv2dGeometry& g : refused) {
    for (ConvPass pass : kPasses) EXPECT_FALSE(fft.supports(pass, g));
  }
}

TEST(ConvolutionFft, NamedAndListedComputingInFp32Only) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  const ConvAlgorithm* fft = conv_algorithm_named("fft");
  ASSERT_NE(fft, nullptr);
  EXPECT_EQ(conv_algorithms().back(), fft);
  EXPECT_EQ(fft->rung, 10);
  for (ConvPass pass : kPasses) {
    EXPECT_TRUE(fft->computes_in(pass, cuda::GemmMath::fp32));
    EXPECT_FALSE(fft->computes_in(pass, cuda::GemmMath::tf32));
    EXPECT_FALSE(fft->computes_in(pass, cuda::GemmMath::bf16));
  }
}

}  // namespace
}  // namespace crema::kernels
