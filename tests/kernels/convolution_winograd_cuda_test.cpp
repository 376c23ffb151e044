// Winograd convolution (v5 F(2x2,3x3), v6 F(4x4,3x3)) on the GPU against the double reference and
// the CPU path, on the 3x3 stride-1 geometries it runs; bit-identical repeats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/convolution/convolution.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

// Winograd (v5, v6) on the geometries it runs: N = 1, odd sizes, tiles past the edges (P or Q
// not a multiple of 2 or 4, P = Q = 1), padding 0 to 3 (backward data: up to 2), groups, C and K
// not multiples of 4, more channels than a GEMM tile, and a realistic layer (C = K = 64, 28x28),
// all in fp32 against the double reference within 1e-5 relative.
TEST(ConvolutionCuda, WinogradAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 3, 7, 9, 5, 3, 3, 1, 1},
      {2, 5, 6, 11, 7, 3, 3, 0, 0},
      {3, 6, 9, 5, 9, 3, 3, 2, 2},
      {2, 4, 7, 8, 6, 3, 3, 3, 1},                  // pad 3: forward and filter only
      {2, 6, 10, 9, 9, 3, 3, 1, 2, 1, 1, 1, 1, 3},  // groups, rectangular padding
      {2, 8, 9, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8},  // depthwise, 2 filters per channel
      {1, 8, 3, 3, 8, 3, 3, 0, 0},                  // P = Q = 1
      {2, 3, 2, 2, 4, 3, 3, 1, 1},                  // one tile, mostly padding
      {1, 70, 5, 7, 130, 3, 3, 1, 1},               // row tiles past K, inner past a slab
      {5, 33, 13, 15, 47, 3, 3, 1, 1},              // tile count not a multiple of 4
      {2, 64, 28, 28, 64, 3, 3, 1, 1},              // a realistic layer
  };
  uint64_t seed = 1500;
  for (const Conv2dGeometry& g : geometries) {
    const Problem p = reference_problem(g, seed += 16);
    for (const ConvAlgorithm* v : {&record("winograd_2x2"), &record("winograd_4x4")}) {
      ASSERT_TRUE(v->supports(ConvPass::forward, g)) << describe(g);
      EXPECT_EQ(v->supports(ConvPass::backward_data, g), g.pad_h <= 2 && g.pad_w <= 2);
      check_algorithm(ctx, p, *v);
    }
  }
}

// Larger batches, where the filter gradient's tiles are split over many blocks, against the CPU
// path; and repeats of every Winograd pass give the same bits.
TEST(ConvolutionCuda, WinogradBatchesAgainstCpuAndRepeatable) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{16, 32, 14, 14, 48, 3, 3, 1, 1};
  const Problem p = cpu_problem(g, 1700);
  for (const ConvAlgorithm* v : {&record("winograd_2x2"), &record("winograd_4x4")}) {
    check_algorithm(ctx, p, *v);
    expect_repeatable(ctx, p, *v);
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
