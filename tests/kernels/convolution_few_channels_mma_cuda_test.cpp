// Backward data with few channels at stride 1 on mma.sync (convolution_few_channels_mma.h), on
// bf16 and fp16 tensors (conv2d_tc_backward_data) and f32 tensors in tf32
// (conv2d_backward_data_nhwc), against the double reference: LeNet's 20 <- 50 5x5 (K not a whole
// k step), C = 31 (4 n-tiles, the last short) from an odd K (16-bit copies of 2 bytes), C = 1 with
// a 5x20 filter, a 1x1 onto 9 channels, padding wider than the filter's reach, 7x7 taps onto 17
// channels, K = 64 (16-byte copies), a plane cut into bands of one row (N = 1: bands for the SMs),
// rows longer than a block's warps cover, and misaligned pointers. dx is poisoned first and every
// element is checked (bound: convolution_few_channels_test_util.h; tf32: the reference on rounded
// operands); repeats are bit-identical; every geometry must fit (a silent fallback fails), and
// `best` must pick the kernel where few_channels_mma_pays says so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/convolution/convolution_few_channels_mma.h"
#include "tests/kernels/convolution_few_channels_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using namespace few_channels;
using Element = cuda::few_channels_mma::Element;

const std::vector<Conv2dGeometry> kGeometries = {
    // N C  H   W  K  R  S  pad_h pad_w
    {3, 20, 12, 12, 50, 5, 5},        // LeNet's conv2: K = 50, the last k step part padding
    {2, 31, 9, 10, 19, 3, 3, 1, 1},   // C = 31, K odd
    {1, 1, 20, 40, 8, 5, 20, 2, 9},   // C = 1, a 5x20 filter, N = 1
    {2, 9, 7, 5, 10, 1, 1},           // 1x1, 9 channels: 2 n-tiles
    {1, 2, 4, 4, 3, 3, 3, 3, 3},      // padding past the filter's reach: outputs of zeros
    {4, 17, 6, 6, 24, 7, 7, 3, 3},    // 7x7 onto 17 channels
    {2, 24, 20, 20, 64, 5, 5, 2, 2},  // K = 64: 16-byte copies; 3 n-tiles
    {2, 12, 33, 35, 32, 3, 3, 1, 1},  // bands of one row (few images for the SMs)
    {1, 5, 3, 300, 8, 3, 3, 1, 1},    // 300 pixels a row: more m-tiles than warps
};

// `best` takes the kernel where it fits a filter with taps onto 8 channels or more, not a whole
// number of 8 or at most two 16-byte vectors of them (`vector` channels a vector), and a 1x1
// onto 8 or more that are not whole vectors.
bool pays(const Conv2dGeometry& g, int vector) {
  if (g.R * g.S == 1) return g.C >= 8 && g.C % vector != 0;
  return g.C >= 8 && (g.C % 8 != 0 || g.C <= 2 * vector);
}

TEST(ConvolutionFewChannelsMmaCuda, Bf16AndF16AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 340;
  for (const Conv2dGeometry& g : kGeometries) {
    for (Kind kind : {Kind::bf16, Kind::f16}) {
      const TcType type = kind == Kind::bf16 ? TcType::bf16 : TcType::f16;
      ASSERT_TRUE(
          cuda::few_channels_mma::fits(g, kind == Kind::bf16 ? Element::bf16 : Element::f16))
          << describe(g);
      EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_direct_mma(g, type), pays(g, 8)) << describe(g);
      if (pays(g, 8)) {
        EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_data, g,
                                        kind == Kind::bf16 ? DType::bf16 : DType::f16),
                     "direct_mma_few_channels")
            << describe(g);
      }
      const Problem p = make(g, kind, seed += 7);
      check(ctx, p, TcKernels::direct_mma, 0);
      check(ctx, p, TcKernels::direct_mma, 2);  // misaligned dy and dx: 2-byte copies and stores
      check(ctx, p, TcKernels::best, 0);
    }
  }
}

TEST(ConvolutionFewChannelsMmaCuda, Tf32AgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 440;
  for (const Conv2dGeometry& g : kGeometries) {
    ASSERT_TRUE(cuda::few_channels_mma::fits(g, Element::f32)) << describe(g);
    EXPECT_EQ(cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, GemmMath::tf32), pays(g, 4))
        << describe(g);
    EXPECT_FALSE(cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, GemmMath::fp32))
        << describe(g) << ": fp32 math keeps exact products";
    if (pays(g, 4)) {
      EXPECT_STREQ(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f32, GemmMath::tf32),
                   "direct_mma_few_channels")
          << describe(g);
    }
    const Problem p = make(g, Kind::f32, seed += 7, true);
    check(ctx, p, TcKernels::direct_mma, 0, GemmMath::tf32);
    check(ctx, p, TcKernels::direct_mma, 4, GemmMath::tf32);
  }
}

// What the kernel does not take.
TEST(ConvolutionFewChannelsMmaCuda, Fits) {
  using cuda::few_channels_mma::fits;
  for (Element e : {Element::bf16, Element::f32}) {
    EXPECT_FALSE(fits({2, 5, 9, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2}, e));     // dilation 2
    EXPECT_FALSE(fits({2, 6, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2}, e));  // groups 2
    EXPECT_FALSE(fits({2, 33, 9, 9, 16, 3, 3, 1, 1}, e));                // C = 33
    EXPECT_FALSE(fits({2, 3, 9, 9, 16, 3, 3, 1, 1, 2, 2}, e));           // stride 2
    EXPECT_TRUE(fits({2, 32, 9, 9, 16, 3, 3, 1, 1}, e));
  }
  // A filter too large for the shared memory: 9 taps x 32 channels x 2048 k.
  EXPECT_FALSE(fits({1, 32, 8, 8, 2048, 3, 3, 1, 1}, Element::bf16));
  EXPECT_FALSE(cuda::conv2d_tc_backward_data_uses_direct_mma(
      {2, 4, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4}, TcType::bf16, TcKernels::direct_mma))
      << "depthwise";
}

}  // namespace
}  // namespace crema::kernels::conv_test
