// The Pooling layer on the GPU against the CPU (check_cuda_parity), every option, and PyTorch's
// numbers on the GPU.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "core/random.h"
#include "tests/fixtures/conv_fixture.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

// Distinct values (a shuffled ramp), so that the maximum of every window is unique and the CPU
// and the GPU cannot differ by a tie.
ParityOptions distinct_inputs(int num_tops) {
  ParityOptions options;
  options.num_tops = num_tops;
  options.bottom_values = [](size_t, size_t count) {
    std::vector<float> v(count);
    std::iota(v.begin(), v.end(), 0.0f);
    Random random(3);
    for (size_t i = count; i > 1; --i) std::swap(v[i - 1], v[random.below(i)]);
    for (float& x : v) x = x / float(count) - 0.5f;
    return v;
  };
  return options;
}

TEST(PoolingLayerCuda, MatchesCpuMax) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: p, type: Pooling, pool: max, kernel_size: 2, stride: 2}",
                    {{4, 20, 24, 24}}, distinct_inputs(1));  // LeNet's pool1
  check_cuda_parity("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2}",
                    {{2, 3, 8, 7}}, distinct_inputs(2));  // ceil, argmax top
  check_cuda_parity(
      "{name: p, type: Pooling, pool: max, kernel_h: 3, kernel_w: 2, stride_h: 2,"
      " stride_w: 3, pad_h: 1, pad_w: 1, round_mode: floor}",
      {{2, 3, 9, 10}}, distinct_inputs(2));
}

TEST(PoolingLayerCuda, MatchesCpuAverage) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1}",
                    {{2, 3, 9, 8}});
  check_cuda_parity(
      "{name: p, type: Pooling, pool: average, kernel_size: [3, 2], stride: [1, 2],"
      " pad: [2, 1], count_include_pad: false}",
      {{1, 4, 6, 7}});
}

TEST(PoolingLayerCuda, MatchesCpuGlobal) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: p, type: Pooling, pool: average, global_pooling: true}",
                    {{3, 16, 7, 7}});
  check_cuda_parity("{name: p, type: Pooling, pool: max, global_pooling: true}", {{2, 5, 6, 9}},
                    distinct_inputs(2));
}

// Adaptive windows (unequal, overlapping, more outputs than inputs) and the divisible sizes the
// layer runs as fixed windows, on N = 1, odd extents and C not a multiple of 8.
TEST(PoolingLayerCuda, MatchesCpuAdaptive) {
  CREMA_REQUIRE_CUDA();
  for (const char* pool : {"max", "average"}) {
    for (const char* size : {"[3, 4]", "1", "[7, 7]", "[6, 6]", "[9, 2]"}) {
      const std::string yaml =
          std::string("{name: p, type: Pooling, pool: ") + pool + ", output_size: " + size + "}";
      check_cuda_parity(yaml, {{1, 13, 7, 7}}, distinct_inputs(1));
      check_cuda_parity(yaml, {{3, 5, 13, 11}}, distinct_inputs(1));
    }
  }
}

TEST(PoolingLayerCuda, GoldenMatchesPyTorch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  check_against_golden(ctx, "maxpool_ceil",
                       "{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2}", 2);
  check_against_golden(ctx, "avgpool_pad",
                       "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
                       " round_mode: floor}");
  check_against_golden(ctx, "avgpool_exclude_pad",
                       "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
                       " count_include_pad: false}");
}

}  // namespace
}  // namespace crema::testing
