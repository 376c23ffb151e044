// Grouped convolution with few channels a group (convolution_grouped_nhwc.h), reached the way the
// layers reach it (conv2d_tc_*), in bf16 and fp16 against the double reference (ref::*_nhwc) on
// the same rounded inputs: every pass (the forward alone and with bias + residual + ReLU and its
// channel statistics, backward data, the filter gradient accumulated onto random values), outputs
// poisoned with NaN, repeats bit-identical (check_passes, convolution_tc_test_util.h, which states
// the tolerance per type). The geometries: ResNeXt's 4 x 4 groups, 8 x 8 at strides 2 and 1, Cg !=
// Kg both ways (16 -> 8, 4 -> 16), a dilated 5x5, a strided 1x1, a 7x1 at strides (2, 1), a 1x7
// (the filter gradient's taps in runs), several channel slabs (512 channels, 16 a group), channels
// that are not a whole slab (96), outputs that read only padding, and enough positions for
// several of the filter gradient's slices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "tests/kernels/convolution_tc_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::TcKernels;

const std::vector<Conv2dGeometry> kGeometries = {
    // N  C   H   W   K  R  S  pad_h pad_w stride_h stride_w dil_h dil_w groups
    {2, 32, 9, 11, 32, 3, 3, 1, 1, 1, 1, 1, 1, 8},    // ResNeXt's 4 x 4
    {2, 64, 13, 12, 64, 3, 3, 1, 1, 2, 2, 1, 1, 8},   // 8 x 8, stride 2 (gathered data)
    {1, 64, 10, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 4},    // Cg 16 -> Kg 8
    {2, 16, 7, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 4},     // Cg 4 -> Kg 16
    {1, 32, 14, 13, 32, 5, 5, 4, 4, 1, 1, 2, 2, 8},   // 5x5, dilation 2
    {2, 32, 10, 10, 64, 1, 1, 0, 0, 3, 3, 1, 1, 8},   // 1x1 at stride 3
    {1, 48, 15, 8, 48, 7, 1, 3, 0, 2, 1, 1, 1, 12},   // 7x1, strides (2, 1)
    {1, 32, 6, 20, 32, 1, 7, 0, 3, 1, 1, 1, 1, 8},    // 1x7: the filter's taps in runs of 3
    {1, 512, 5, 6, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32},  // 16 a group, several slabs
    {1, 96, 6, 5, 96, 3, 3, 1, 1, 1, 1, 1, 1, 24},    // 24 channel quads: not a whole slab
    {1, 16, 3, 3, 16, 3, 3, 3, 3, 2, 2, 1, 1, 4},     // outputs that read only padding
    {4, 32, 40, 40, 32, 3, 3, 1, 1, 1, 1, 1, 1, 8},   // 6,400 positions: many slices
};

// Every geometry through the kernels forced and through `best` (which picks them per pass: the
// forward at 4 channels a group or 8 at stride 1, backward data at Kg <= 8, the filter gradient
// at 4), then with every buffer misaligned (the implicit GEMMs' element path takes over, still
// right).
TEST(ConvolutionGroupedNhwcCuda, EveryPassAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 310;
  for (const Conv2dGeometry& g : kGeometries) {
    ASSERT_TRUE(cuda::grouped_nhwc::fits(g)) << describe(g);
    const bool four = g.C == 4 * g.groups, data = g.K <= 8 * g.groups;
    const bool forward = four || (g.C == 8 * g.groups && g.stride_h == 1 && g.stride_w == 1);
    EXPECT_EQ(cuda::conv2d_tc_forward_uses_grouped(g), forward) << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_grouped(g), data) << describe(g);
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_grouped(g), four) << describe(g);
    EXPECT_EQ(
        std::string(conv2d_nhwc_kernel(ConvPass::forward, g, DType::bf16)) == "direct_grouped",
        four)
        << describe(g);
    EXPECT_EQ(
        std::string(conv2d_nhwc_kernel(ConvPass::backward_data, g, DType::f16)) == "direct_grouped",
        data)
        << describe(g);
    for (TcType type : kTypes) {
      const TcProblem p = make_problem(g, type, seed += 7);
      check_passes(ctx, p, 0, TcKernels::grouped);
      check_passes(ctx, p, 0, TcKernels::best);
      check_passes(ctx, p, 2, TcKernels::grouped);
    }
  }
}

// What the kernels do not take: one group, depthwise, 2 or 32 channels a group, 12.
TEST(ConvolutionGroupedNhwcCuda, Fits) {
  using cuda::grouped_nhwc::fits;
  EXPECT_FALSE(fits({2, 32, 9, 9, 32, 3, 3, 1, 1}));                     // one group
  EXPECT_FALSE(fits({2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32}));     // depthwise
  EXPECT_FALSE(fits({2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 16}));     // 2 a group
  EXPECT_FALSE(fits({2, 256, 9, 9, 256, 3, 3, 1, 1, 1, 1, 1, 1, 8}));    // 32 a group
  EXPECT_FALSE(fits({2, 48, 9, 9, 48, 3, 3, 1, 1, 1, 1, 1, 1, 4}));      // 12 a group
  EXPECT_FALSE(fits({2, 32, 9, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2}));      // Kg 32
  EXPECT_FALSE(fits({1, 64, 60, 60, 64, 15, 15, 7, 7, 1, 1, 1, 1, 4}));  // 225 x 16 taps
  EXPECT_TRUE(fits({1, 64, 60, 60, 64, 13, 13, 6, 6, 1, 1, 1, 1, 4}));   // 169 x 16
  EXPECT_FALSE(cuda::conv2d_tc_forward_uses_grouped({2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 16},
                                                    TcKernels::grouped));
  EXPECT_FALSE(cuda::conv2d_tc_forward_uses_grouped({2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 8},
                                                    TcKernels::mma_sync));
  EXPECT_TRUE(cuda::conv2d_tc_backward_filter_uses_grouped(
      {2, 256, 9, 9, 256, 3, 3, 1, 1, 1, 1, 1, 1, 16}, TcKernels::grouped));  // forced: fits
  EXPECT_FALSE(cuda::conv2d_tc_backward_filter_uses_grouped(
      {2, 256, 9, 9, 256, 3, 3, 1, 1, 1, 1, 1, 1, 16}));  // best: 16 a group, the GEMMs
  EXPECT_FALSE(cuda::grouped_nhwc::aligned(
      {reinterpret_cast<const void*>(16), reinterpret_cast<const void*>(34)}));
  EXPECT_TRUE(cuda::grouped_nhwc::aligned({reinterpret_cast<const void*>(16), nullptr}));
}

}  // namespace
}  // namespace crema::kernels::conv_test
