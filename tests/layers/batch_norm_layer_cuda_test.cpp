// BatchNorm layer on the GPU against the CPU: tops over several training passes, then the running
// statistics and the batch counter, bottom and parameter gradients; 2-D and 4-D, LeNet's size,
// the test phase, without affine parameters, use_global_stats in training.
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

TEST(BatchNormLayerCuda, MatchesCpuTrainPhase4d) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm}", {{4, 6, 7, 5}}, passes(3));
}

TEST(BatchNormLayerCuda, MatchesCpuTrainPhase2d) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm, momentum: 0.3, eps: 1e-3}", {{9, 13}}, passes(3));
}

TEST(BatchNormLayerCuda, MatchesCpuAtLeNetSize) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm}", {{64, 20, 24, 24}}, passes(2));
}

TEST(BatchNormLayerCuda, MatchesCpuTestPhase) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm}", {{3, 5, 4, 4}}, passes(2, Phase::test));
}

TEST(BatchNormLayerCuda, MatchesCpuWithoutAffine) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm, affine: false}", {{5, 3, 3, 3}}, passes(2));
}

TEST(BatchNormLayerCuda, MatchesCpuWithGlobalStatsInTraining) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm, use_global_stats: true}", {{4, 3, 2, 5}},
                    passes(2));
}

TEST(BatchNormLayerCuda, MatchesCpuPerActivation) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: bn, type: BatchNorm, mode: per_activation}", {{6, 3, 4, 5}}, passes(3));
  check_cuda_parity("{name: bn, type: BatchNorm, mode: per_activation}", {{5, 3, 2, 2}},
                    passes(2, Phase::test));
}

}  // namespace
}  // namespace crema::testing
