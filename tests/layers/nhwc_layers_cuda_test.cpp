// The memory-bound layers of a CNN in channels-last (nhwc) on the GPU against the same layers in
// nhwc on the CPU (float32; tops over several training passes, running statistics, bottom and
// parameter gradients, 1e-5 relative): BatchNorm, BatchNormReLU (with the residual), Pooling (max,
// average, global) and Concat along channels.
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

ParityOptions nhwc(int passes = 1, Phase phase = Phase::train) {
  ParityOptions options;
  options.forward_passes = passes;
  options.phase = phase;
  options.layout = Layout::nhwc;
  return options;
}

TEST(NhwcLayersCuda, BatchNormMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm}", {{4, 6, 7, 5}}, nhwc(3));
  check_cuda_parity("{name: bn, type: BatchNorm, momentum: 0.3}", {{1, 13, 9, 11}}, nhwc(2));
  check_cuda_parity("{name: bn, type: BatchNorm}", {{8, 64, 14, 14}}, nhwc(2));
  check_cuda_parity("{name: bn, type: BatchNorm}", {{3, 5, 4, 4}}, nhwc(2, Phase::test));
}

TEST(NhwcLayersCuda, BatchNormReLUMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNormReLU}", {{4, 6, 7, 5}}, nhwc(2));
  check_cuda_parity("{name: bn, type: BatchNormReLU}", {{2, 13, 9, 11}, {2, 13, 9, 11}}, nhwc(2));
}

TEST(NhwcLayersCuda, PoolingMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2, pad: 1}",
                    {{2, 13, 15, 17}}, nhwc());
  check_cuda_parity("{name: p, type: Pooling, pool: average, kernel_size: 2, stride: 2}",
                    {{2, 5, 9, 8}}, nhwc());
  check_cuda_parity("{name: p, type: Pooling, pool: average, global_pooling: true}",
                    {{4, 64, 7, 7}}, nhwc());
}

TEST(NhwcLayersCuda, ConcatMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: c, type: Concat}", {{2, 3, 5, 7}, {2, 8, 5, 7}, {2, 1, 5, 7}}, nhwc());
}

}  // namespace
}  // namespace crema::testing
