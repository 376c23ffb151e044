// Dropout layer on the GPU against the CPU: the same seed and step give the same masks, so the
// tops and gradients agree exactly, over several training passes; and the test phase.
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

TEST(DropoutLayerCuda, MatchesCpuTrainPhaseExactly) {
  CREMA_REQUIRE_CUDA();
  ParityOptions options;
  options.forward_passes = 3;
  options.tolerance = 0.0;
  check_cuda_parity("{name: drop, type: Dropout, dropout_ratio: 0.3}", {{37, 29}}, options);
  check_cuda_parity("{name: drop, type: Dropout}", {{64, 500}}, options);
}

TEST(DropoutLayerCuda, MatchesCpuTestPhase) {
  CREMA_REQUIRE_CUDA();
  ParityOptions options;
  options.phase = Phase::test;
  options.tolerance = 0.0;
  check_cuda_parity("{name: drop, type: Dropout}", {{5, 11}}, options);
}

// The same rows kept on both devices (one hash per sample), over several training passes; N = 1,
// rows whose size is not a multiple of 4, and the test phase.
TEST(StochasticDepthLayerCuda, MatchesCpuTrainPhaseExactly) {
  CREMA_REQUIRE_CUDA();
  ParityOptions options;
  options.forward_passes = 3;
  options.tolerance = 0.0;
  check_cuda_parity("{name: sd, type: StochasticDepth, p: 0.3}", {{37, 5, 7, 3}}, options);
  check_cuda_parity("{name: sd, type: StochasticDepth, p: 0.1}", {{1, 13, 9, 9}}, options);
  check_cuda_parity("{name: sd, type: StochasticDepth, p: 0.5}", {{64, 96, 14, 14}}, options);
  check_cuda_parity("{name: sd, type: StochasticDepth, p: 0.5, mode: batch}", {{8, 11}}, options);
  options.phase = Phase::test;
  check_cuda_parity("{name: sd, type: StochasticDepth, p: 0.5}", {{5, 11}}, options);
}

}  // namespace
}  // namespace crema::testing
