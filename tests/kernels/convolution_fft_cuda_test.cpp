// FFT convolution (v10) on the GPU against the double reference and the CPU path, on the
// stride-1 ungrouped geometries it runs (every transform size F = 8 .. 64); bit-identical repeats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/convolution/convolution.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

// N = 1, odd H and W, C and K not multiples of 4, 1x1 to 7x7 and rectangular filters, pads 0 to 3,
// every F from 8 to 64, maps that exactly fill F, products wider than one 64 x 64 GEMM tile, and
// maps not a multiple of a transform block's count: every pass (outputs poisoned with NaN, dw and
// db accumulated onto random values) within 1e-5 relative of the double reference.
TEST(ConvolutionCuda, FftAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w
      {1, 5, 1, 1, 3, 1, 1},             // F = 8, a single pixel
      {2, 7, 3, 5, 9, 3, 2, 0, 1},       // F = 8, rectangular filter
      {1, 3, 7, 9, 5, 3, 3, 1, 1},       // F = 16
      {2, 5, 6, 11, 7, 1, 1},            // 1x1
      {1, 6, 5, 7, 10, 5, 5, 2, 2},      // 5x5
      {1, 2, 4, 4, 3, 3, 3, 3, 3},       // pad 3 > R - 1: outputs that read only padding
      {2, 3, 9, 13, 6, 7, 7, 3, 3},      // 7x7, F = 32
      {3, 10, 31, 29, 13, 5, 5, 1, 2},   // F = 64
      {2, 4, 62, 60, 3, 3, 3, 1, 2},     // 64 x 64 padded: F exactly filled
      {1, 70, 13, 15, 130, 3, 3, 1, 1},  // C past one GEMM tile, K past two
      {65, 6, 6, 6, 5, 3, 3, 1, 1},      // filter's inner N = 65; 390 maps at F = 8
      {2, 64, 28, 28, 64, 3, 3, 1, 1},   // a realistic layer
  };
  uint64_t seed = 2100;
  for (const Conv2dGeometry& g : geometries) {
    ASSERT_TRUE(record("fft").supports(ConvPass::forward, g)) << describe(g);
    check_algorithm(ctx, reference_problem(g, seed += 16), record("fft"));
  }
}

// A batch where the filter gradient's inner dimension (N) is long, against the CPU path; and
// repeats of every pass give the same bits (fixed summation orders, no atomics).
TEST(ConvolutionCuda, FftBatchesAgainstCpuAndRepeatable) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{32, 24, 14, 14, 40, 5, 5, 2, 2};
  const Problem p = cpu_problem(g, 2400);
  check_algorithm(ctx, p, record("fft"));
  expect_repeatable(ctx, p, record("fft"));
}

// A geometry v10 does not take is refused with a crema::Error, not computed wrong.
TEST(ConvolutionCuda, FftRefusesStrideTwo) {
  CREMA_REQUIRE_CUDA();
  const Conv2dGeometry g{1, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2};
  EXPECT_FALSE(record("fft").supports(ConvPass::forward, g));
  EXPECT_THROW(check_conv_algorithm(record("fft"), ConvPass::forward, g, "test"), Error);
}

}  // namespace
}  // namespace crema::kernels::conv_test
