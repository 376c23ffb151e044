// LRN layer on the GPU against the CPU: across channels (Caffe's and AlexNet's settings) and
// within a channel.
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

TEST(LRNLayerCuda, MatchesCpuAcrossChannels) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: norm, type: LRN, local_size: 5, alpha: 0.5}", {{2, 7, 5, 6}});
  check_cuda_parity("{name: norm, type: LRN, local_size: 5, alpha: 1e-4, beta: 0.75}",
                    {{2, 96, 13, 13}});
}

TEST(LRNLayerCuda, MatchesCpuWithinChannel) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: norm, type: LRN, norm_region: WITHIN_CHANNEL, local_size: 3, alpha: 2}",
                    {{2, 3, 6, 5}});
}

}  // namespace
}  // namespace crema::testing
