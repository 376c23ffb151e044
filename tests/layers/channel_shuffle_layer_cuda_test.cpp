// ChannelShuffle on CUDA against the same layer on the CPU (tests/support/layer_parity.h): the
// top and the bottom gradient, bit for bit (a permutation copies values), on awkward shapes that
// take each of kernels::permute's CUDA paths (general permutation, batched transpose, copy).
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

TEST(ChannelShuffleLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  ParityOptions exact;
  exact.tolerance = 0.0;
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 3}", {{2, 6, 5, 7}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 5}", {{3, 15, 7}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 2}", {{2, 6, 3, 1, 5}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 4}", {{33, 12, 1, 1}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 2}", {{1, 10, 4, 3}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 1}", {{2, 8, 3, 3}}, exact);
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 8}", {{2, 8, 3, 3}}, exact);
  // ShuffleNet v2's size: 116 channels in 2 groups at 28 x 28.
  check_cuda_parity("{name: s, type: ChannelShuffle, groups: 2}", {{16, 116, 28, 28}}, exact);
}

}  // namespace
}  // namespace crema::testing
