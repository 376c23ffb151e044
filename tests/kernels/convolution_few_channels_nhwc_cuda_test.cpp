// Backward data with few channels on the CUDA cores (convolution_few_channels_nhwc.h), on bf16 and
// fp16 tensors (conv2d_tc_backward_data) and f32 tensors in both maths (conv2d_backward_data_nhwc),
// against the double reference on the operands as stored: the 7x7 stride-2 stem (C = 3, odd
// sizes), LeNet's 5x5 (C = 20, K = 50: k chunks with a short last one), C = 1 with a 5x20 speech
// filter at stride 2, C = 31, stride 3 and 4 (phases that no tap reaches: zeros), strides (2, 1),
// 8 taps a column, a 1x1, planes of several tiles, outputs that read only padding, N = 1, and
// misaligned pointers. dx is poisoned first and every element is checked; repeats are
// bit-identical; every geometry must fit the kernel (a silent fallback fails), and `best` must
// pick it where its rule says.
//
// Tolerance per element: convolution_few_channels_test_util.h (the kernel sums R*S*K exact
// products in fp32 by fused multiply-adds; one more rounding at a 16-bit store).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "tests/kernels/convolution_few_channels_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using namespace few_channels;

const std::vector<Conv2dGeometry> kGeometries = {
    // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
    {2, 3, 29, 31, 16, 7, 7, 3, 3, 2, 2},    // the stem, odd sizes
    {3, 20, 12, 12, 50, 5, 5},               // LeNet's conv2: K = 50, chunks of 8 and a short one
    {1, 1, 20, 40, 8, 5, 20, 2, 9, 2, 2},    // C = 1, a 5x20 speech filter, N = 1
    {2, 31, 9, 10, 19, 3, 3, 1, 1},          // C = 31 (8 groups, the last of 3), K odd
    {2, 13, 16, 11, 64, 3, 3, 1, 1, 3, 3},   // stride 3
    {2, 3, 17, 17, 16, 3, 3, 1, 1, 4, 4},    // stride 4: phases no tap reaches
    {2, 7, 15, 14, 12, 5, 3, 2, 1, 2, 1},    // strides (2, 1)
    {1, 4, 12, 10, 7, 8, 8, 3, 4},           // 8 taps a column (NR = 8)
    {1, 1, 41, 30, 8, 41, 11, 20, 5, 2, 2},  // DeepSpeech2's 41x11 s2: 21 taps (NR = 24)
    {2, 6, 7, 5, 10, 1, 1},                  // 1x1
    {1, 2, 4, 4, 3, 3, 3, 3, 3, 3, 2},       // outputs that read only padding
    {2, 5, 70, 75, 24, 3, 3, 1, 1},          // a plane of 2 x 3 tiles
    {1, 3, 230, 226, 20, 7, 7, 3, 3, 2, 2},  // the stem's plane, tiles of 28 columns
};

// `best`'s rule for the kernel on mma.sync (convolution_few_channels_mma_cuda_test.cpp has its
// tests), which takes those layers first: stride 1, taps onto 8 channels or more, not a whole
// number of 8 or at most two vectors of them (a 1x1: not whole vectors).
bool mma_pays(const Conv2dGeometry& g, int vector) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.C < 8) return false;
  if (g.R * g.S == 1) return g.C % vector != 0;
  return g.C % 8 != 0 || g.C <= 2 * vector;
}

bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

// Each geometry through the kernel (forced), through `best` (whichever family it picks, which
// must be the kernel where few_channels_direct_pays says so: channels not a whole 16-byte
// vector, more than 8 of them going to col2im where that runs -- bf16 with 25 taps or more on
// Hopper, f32 in tf32), with dy and dx misaligned, and through mma.sync (the family it replaces,
// still right). f32: in fp32 math (tf32 and bf16 round the operands first: the math tests'
// references, tests/kernels/convolution_nhwc_cuda_test.cpp).
TEST(ConvolutionFewChannelsNhwcCuda, Bf16AndF16AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 140;
  for (const Conv2dGeometry& g : kGeometries) {
    ASSERT_TRUE(cuda::few_channels_nhwc::fits(g)) << describe(g);
    // best: direct for at most 8 channels, or more from a K that is not a multiple of 8 where
    // col2im (bf16, Hopper, 25 taps or more, <= 8 channels or K % 8 != 0) does not run; else the
    // implicit GEMM (C % 8 != 0: mma.sync).
    const bool mma = mma_pays(g, 8);
    const bool col2im = !mma && hopper() && g.R * g.S >= 25 && (g.C <= 8 || g.K % 8 != 0);
    const bool direct16 = !mma && (g.C <= 8 || g.K % 8 != 0);
    const bool direct_bf16 = !mma && (g.C <= 8 || (direct16 && !col2im));
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_direct(g, TcType::bf16), direct_bf16)
        << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_direct(g, TcType::f16), direct16) << describe(g);
    EXPECT_EQ(std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::bf16)),
              mma           ? "direct_mma_few_channels"
              : direct_bf16 ? "direct_few_channels"
              : col2im      ? "col2im_gemm"
                            : "tc_implicit_gemm")
        << describe(g);
    for (Kind kind : {Kind::bf16, Kind::f16}) {
      const Problem p = make(g, kind, seed += 7);
      check(ctx, p, TcKernels::direct, 0);
      check(ctx, p, TcKernels::direct, 2);  // misaligned dy and dx: element loads and stores
      check(ctx, p, TcKernels::best, 0);
      check(ctx, p, TcKernels::mma_sync, 0);
    }
  }
}

TEST(ConvolutionFewChannelsNhwcCuda, F32AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 240;
  for (const Conv2dGeometry& g : kGeometries) {
    // In 4-float vectors; col2im runs in tf32 only, wherever C % 4 != 0 (C > 1).
    const bool few = g.C % 4 != 0, mma = mma_pays(g, 4), col2im = few && g.C > 1 && !mma;
    const bool fp32 = few && (g.C <= 8 || g.K % 4 != 0);
    const bool tf32 = few && !mma && (g.C <= 8 || (g.K % 4 != 0 && !col2im));
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_direct(g, GemmMath::fp32), fp32) << describe(g);
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_direct(g, GemmMath::tf32), tf32) << describe(g);
    if (few) {
      EXPECT_EQ(
          std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f32, GemmMath::tf32)),
          mma    ? "direct_mma_few_channels"
          : tf32 ? "direct_few_channels"
                 : "col2im_gemm")
          << describe(g);
    }
    const Problem p = make(g, Kind::f32, seed += 7);
    check(ctx, p, TcKernels::direct, 0, GemmMath::fp32);
    check(ctx, p, TcKernels::direct, 4, GemmMath::fp32);
    check(ctx, p, TcKernels::best, 0, GemmMath::fp32);
  }
}

// What the kernel does not take, and what `best` leaves to the implicit GEMMs.
TEST(ConvolutionFewChannelsNhwcCuda, Fits) {
  using cuda::few_channels_nhwc::fits;
  EXPECT_FALSE(fits({2, 5, 9, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2}));     // dilation 2
  EXPECT_FALSE(fits({2, 6, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}));  // groups 2
  EXPECT_FALSE(fits({2, 32, 9, 9, 16, 3, 3, 1, 1}));                // C = 32
  EXPECT_FALSE(fits({1, 3, 30, 30, 16, 25, 3, 12, 1}));             // 25 taps a column
  EXPECT_TRUE(fits({1, 3, 30, 30, 16, 25, 3, 12, 1, 2, 1}));        // 13 at stride 2
  const Conv2dGeometry sixteen{2, 16, 9, 9, 16, 3, 3, 1, 1};        // fits, but C % 8 == 0:
  EXPECT_TRUE(fits(sixteen));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_direct(sixteen, TcType::bf16));
  EXPECT_FALSE(cuda::conv2d_backward_data_nhwc_uses_direct(sixteen, GemmMath::fp32));
  EXPECT_FALSE(
      cuda::conv2d_backward_data_nhwc_uses_direct({2, 12, 9, 9, 16, 3, 3, 1, 1}, GemmMath::fp32))
      << "12 floats: three 16-byte vectors";
  EXPECT_TRUE(cuda::conv2d_tc_backward_data_uses_direct(sixteen, TcType::bf16, TcKernels::direct));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_direct({2, 4, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},
                                                         TcType::bf16, TcKernels::direct))
      << "depthwise";
}

}  // namespace
}  // namespace crema::kernels::conv_test
