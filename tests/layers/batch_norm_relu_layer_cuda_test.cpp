// BatchNormReLU layer on the GPU against the CPU, both forms, over several training passes (the
// running statistics), in the test phase and without affine parameters; awkward shapes (N = 1,
// C = 3, odd H and W).
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

ParityOptions passes(int n, Phase phase = Phase::train) {
  ParityOptions options;
  options.forward_passes = n;
  options.phase = phase;
  return options;
}

TEST(BatchNormReLULayerCuda, MatchesCpuTrainPhase) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNormReLU}", {{1, 3, 7, 5}}, passes(3));
  check_cuda_parity("{name: bn, type: BatchNormReLU, momentum: 0.3}", {{9, 13}}, passes(2));
}

TEST(BatchNormReLULayerCuda, MatchesCpuResidual) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNormReLU}", {{4, 6, 9, 11}, {4, 6, 9, 11}}, passes(3));
  check_cuda_parity("{name: bn, type: BatchNormReLU, affine: false}", {{2, 3, 5, 5}, {2, 3, 5, 5}},
                    passes(2));
}

TEST(BatchNormReLULayerCuda, MatchesCpuTestPhase) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNormReLU}", {{3, 5, 4, 3}, {3, 5, 4, 3}},
                    passes(2, Phase::test));
}

}  // namespace
}  // namespace crema::testing
