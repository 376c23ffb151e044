// RNN, LSTM and GRU layers on the GPU against the CPU: every top, the bottom gradients (x, h0,
// c0) and every parameter gradient, for one and several layers, bidirectional, batch_first,
// lengths, initial states from bottoms, the last/hidden/cell outputs, no bias, N = 1, and the
// row-LSTM of configs/lstm_fashion_mnist.yaml at its size; lengths out of range.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

// `num_bottoms` bottoms, the last one the lengths when `lengths` is not empty (no gradient).
ParityOptions options(int num_tops, size_t num_bottoms, const std::vector<float>& lengths = {}) {
  ParityOptions o;
  o.num_tops = num_tops;
  o.forward_passes = 2;  // the reserve and the states are rewritten, not accumulated
  o.propagate_down.assign(num_bottoms, true);
  if (!lengths.empty()) {
    o.propagate_down.back() = false;
    o.bottom_values = [lengths, num_bottoms](size_t b, size_t count) {
      return b + 1 == num_bottoms ? lengths : random_values(count, -1.0f, 1.0f, 7 + b);
    };
  }
  return o;
}

TEST(LSTMLayerCuda, MatchesCpuOneLayer) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: l, type: LSTM, num_output: 13}", {{7, 5, 9}}, options(1, 1));
}

TEST(LSTMLayerCuda, MatchesCpuTwoLayersBidirectionalLengths) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(
      "{name: l, type: LSTM, num_output: 11, num_layers: 2, bidirectional: true, lengths: true, "
      "outputs: [sequence, last, hidden, cell]}",
      {{9, 6, 5}, {6}}, options(4, 2, {9, 1, 4, 9, 7, 2}));
}

TEST(LSTMLayerCuda, MatchesCpuBatchFirstInitialStatesNoBias) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(
      "{name: l, type: LSTM, num_output: 6, num_layers: 3, batch_first: true, bias_term: false, "
      "initial_state: bottom, outputs: [last, hidden, cell]}",
      {{5, 4, 3}, {3, 5, 6}, {3, 5, 6}}, options(3, 3));
}

TEST(LSTMLayerCuda, MatchesCpuSingleSequence) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: l, type: LSTM, num_output: 5, bidirectional: true, lengths: true}",
                    {{6, 1, 3}, {1}}, options(1, 2, {4}));
}

TEST(LSTMLayerCuda, MatchesCpuRowLstmOfFashionMnist) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: lstm, type: LSTM, num_output: 128, batch_first: true, outputs: [last]}",
                    {{64, 28, 28}}, options(1, 1));
}

TEST(GRULayerCuda, MatchesCpuOneLayer) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: g, type: GRU, num_output: 10}", {{8, 3, 7}}, options(1, 1));
}

TEST(GRULayerCuda, MatchesCpuTwoLayersBidirectionalBatchFirstLengthsInitialState) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(
      "{name: g, type: GRU, num_output: 9, num_layers: 2, bidirectional: true, batch_first: "
      "true, initial_state: bottom, lengths: true, outputs: [sequence, last, hidden]}",
      {{5, 7, 4}, {4, 5, 9}, {5}}, options(3, 3, {7, 3, 1, 6, 7}));
}

TEST(RNNLayerCuda, MatchesCpuTanh) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: r, type: RNN, num_output: 12, num_layers: 2}", {{6, 4, 5}},
                    options(1, 1));
}

TEST(RNNLayerCuda, MatchesCpuReluBidirectionalLengthsLast) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(
      "{name: r, type: RNN, num_output: 7, nonlinearity: relu, bidirectional: true, lengths: "
      "true, initial_state: bottom, outputs: [last, sequence]}",
      {{5, 3, 6}, {2, 3, 7}, {3}}, options(2, 3, {2, 5, 1}));
}

// On a GPU the lengths are checked on the host at the first forward (later steps clamp them).
TEST(LSTMLayerCuda, LengthsOutOfRangeAreErrorsAtTheFirstForward) {
  CREMA_REQUIRE_CUDA();
  for (const std::vector<float>& lengths :
       {std::vector<float>{2, 5}, std::vector<float>{0, 3}, std::vector<float>{1.5f, 2}}) {
    Context ctx(Device::cuda(0));
    LayerHarness h("{name: l, type: LSTM, num_output: 2, lengths: true}", {{4, 2, 3}, {2}}, ctx);
    h.set_bottom(1, lengths);
    try {
      h.forward();
      ADD_FAILURE() << "accepted lengths " << lengths[0] << ", " << lengths[1];
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer 'l' (LSTM)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("lengths"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crema::testing
