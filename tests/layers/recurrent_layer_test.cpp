// RNN, LSTM and GRU layers: numerical gradient checks for every option (layers, bidirectional,
// batch_first, lengths, initial states from bottoms, the last/hidden/cell outputs, no bias),
// PyTorch's values and gradients through the layer's options (tests/fixtures/
// make_recurrent_fixtures.py), PyTorch's parameter names and shapes, the outputs' consistency
// with each other (padding, `last` against the sequence, batch_first against time-major), frozen
// parameters, the multiply-add count, and errors that name the layer and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// Random bottoms (x, h0, c0 in [-1, 1)), `lengths` as the last bottom when given, and parameters
// in [-0.7, 0.7): wider than the default init, so that the gates are not all near 1/2.
void fill_inputs(LayerHarness& h, const std::vector<float>& lengths, uint64_t seed) {
  const size_t values = h.bottom.size() - (lengths.empty() ? 0 : 1);
  for (size_t b = 0; b < values; ++b) {
    h.set_bottom(b, random_values(size_t(h.bottom[b]->value.numel()), -1.0f, 1.0f, seed + b));
  }
  if (!lengths.empty()) h.set_bottom(h.bottom.size() - 1, lengths);
  for (Param& p : h.layer->params()) {
    set_values(p.value, random_values(size_t(p.value.numel()), -0.7f, 0.7f, ++seed * 31));
  }
}

void gradient_check(const std::string& yaml, const std::vector<Shape>& shapes, int num_tops = 1,
                    const std::vector<float>& lengths = {}) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness h(yaml, shapes, ctx, num_tops, Phase::train, DType::f64);
  fill_inputs(h, lengths, 3);
  GradientCheckOptions options;
  options.check_bottom.assign(shapes.size(), true);
  if (!lengths.empty()) options.check_bottom.back() = false;  // lengths get no gradient
  check_gradients(h, options);
}

// ---- LSTM ------------------------------------------------------------------------------------

TEST(LSTMLayer, GradientOneLayer) {
  gradient_check("{name: lstm, type: LSTM, num_output: 3}", {{4, 2, 5}});
}

TEST(LSTMLayer, GradientTwoLayersBidirectional) {
  gradient_check("{name: lstm, type: LSTM, num_output: 3, num_layers: 2, bidirectional: true}",
                 {{3, 2, 4}});
}

TEST(LSTMLayer, GradientBatchFirstWithoutBias) {
  gradient_check("{name: lstm, type: LSTM, num_output: 4, batch_first: true, bias_term: false}",
                 {{3, 4, 2}});
}

TEST(LSTMLayer, GradientLengthsBidirectional) {
  gradient_check("{name: lstm, type: LSTM, num_output: 3, bidirectional: true, lengths: true}",
                 {{5, 3, 2}, {3}}, 1, {5, 2, 1});
}

TEST(LSTMLayer, GradientInitialStatesFromBottoms) {
  gradient_check(
      "{name: lstm, type: LSTM, num_output: 3, num_layers: 2, initial_state: bottom, "
      "outputs: [sequence, hidden, cell]}",
      {{3, 2, 3}, {2, 2, 3}, {2, 2, 3}}, 3);
}

TEST(LSTMLayer, GradientLastHiddenCellTwoLayersBidirectionalLengths) {
  gradient_check(
      "{name: lstm, type: LSTM, num_output: 2, num_layers: 2, bidirectional: true, "
      "batch_first: true, lengths: true, initial_state: bottom, outputs: [last, hidden, cell]}",
      {{3, 4, 3}, {4, 3, 2}, {4, 3, 2}, {3}}, 3, {2, 4, 1});
}

// ---- GRU -------------------------------------------------------------------------------------

TEST(GRULayer, GradientOneLayer) {
  gradient_check("{name: gru, type: GRU, num_output: 3}", {{4, 2, 3}});
}

TEST(GRULayer, GradientTwoLayersBidirectionalBatchFirst) {
  gradient_check(
      "{name: gru, type: GRU, num_output: 2, num_layers: 2, bidirectional: true, "
      "batch_first: true, outputs: [sequence, last]}",
      {{2, 3, 3}}, 2);
}

TEST(GRULayer, GradientLengthsInitialStateLastAndHidden) {
  gradient_check(
      "{name: gru, type: GRU, num_output: 3, initial_state: bottom, lengths: true, "
      "outputs: [hidden, last, sequence]}",
      {{4, 3, 2}, {1, 3, 3}, {3}}, 3, {1, 4, 3});
}

TEST(GRULayer, GradientWithoutBias) {
  gradient_check("{name: gru, type: GRU, num_output: 3, bias_term: false, outputs: [last]}",
                 {{3, 2, 4}});
}

// ---- RNN -------------------------------------------------------------------------------------

TEST(RNNLayer, GradientTanh) {
  gradient_check("{name: rnn, type: RNN, num_output: 4}", {{5, 2, 3}});
}

TEST(RNNLayer, GradientRelu) {
  // Pre-activations near 0 would be kinks; with these seeds none is within the step of 0.
  gradient_check("{name: rnn, type: RNN, num_output: 3, nonlinearity: relu}", {{3, 2, 2}});
}

TEST(RNNLayer, GradientTwoLayersBidirectionalLengthsInitialState) {
  gradient_check(
      "{name: rnn, type: RNN, num_output: 3, num_layers: 2, bidirectional: true, "
      "initial_state: bottom, lengths: true, outputs: [sequence, last, hidden]}",
      {{4, 2, 3}, {4, 2, 3}, {2}}, 3, {3, 4});
}

TEST(RNNLayer, GradientBatchFirstLast) {
  gradient_check(
      "{name: rnn, type: RNN, num_output: 3, num_layers: 3, batch_first: true, outputs: [last]}",
      {{2, 4, 3}});
}

// ---- PyTorch's values --------------------------------------------------------------------------

// The layer on a case of recurrent_fixtures.safetensors: its inputs and parameters (by PyTorch's
// names) in, every output and gradient against torch's float64 results.
void expect_matches_pytorch(const std::string& name, const std::string& yaml,
                            const std::vector<std::string>& outputs) {
  SCOPED_TRACE(name);
  static const SafetensorsFixture f("recurrent_fixtures.safetensors");
  auto at = [&](const std::string& key) -> const Tensor& { return f.tensor(name + "." + key); };
  auto exact = [&](const std::string& key) { return kernels::testing::to_double(at(key)); };
  std::vector<std::string> bottoms = {"x"};
  for (const char* b : {"h0", "c0", "lengths"}) {
    if (f.has(name + "." + b)) bottoms.push_back(b);
  }
  std::vector<Shape> shapes;
  for (const std::string& b : bottoms) shapes.push_back(at(b).shape());
  Context ctx;
  LayerHarness h(yaml, shapes, ctx, int(outputs.size()));
  for (size_t b = 0; b < bottoms.size(); ++b) h.bottom[b]->value.copy_from(at(bottoms[b]));
  for (Param& p : h.layer->params()) p.value.copy_from(at(p.name.substr(2)));  // "l.weight_.."
  for (Blob* t : h.top) t->value.fill(NAN);
  h.forward();
  for (size_t t = 0; t < outputs.size(); ++t) {
    EXPECT_LT(kernels::testing::rel_error(h.top[t]->value.to_vector(), exact(outputs[t])), 1e-5)
        << outputs[t];
    h.top[t]->grad.copy_from(at("d_" + outputs[t]));
  }
  std::vector<bool> down;
  for (const std::string& b : bottoms) down.push_back(b != "lengths");
  for (Blob* b : h.bottom) b->grad.fill(NAN);
  h.layer->backward(h.top, down, h.bottom, ctx);
  for (size_t b = 0; b < bottoms.size(); ++b) {
    if (!down[b]) continue;
    EXPECT_LT(kernels::testing::rel_error(h.bottom[b]->grad.to_vector(), exact("d" + bottoms[b])),
              1e-5)
        << "d" << bottoms[b];
  }
  for (Param& p : h.layer->params()) {
    EXPECT_LT(kernels::testing::rel_error(p.grad.to_vector(), exact("grad." + p.name.substr(2))),
              1e-5)
        << p.name;
  }
}

TEST(LSTMLayer, MatchesPyTorchBatchFirstLengthsInitialStates) {
  expect_matches_pytorch("lstm",
                         "{name: l, type: LSTM, num_output: 4, num_layers: 2, bidirectional: true, "
                         "batch_first: true, initial_state: bottom, lengths: true, "
                         "outputs: [sequence, hidden, cell]}",
                         {"sequence", "hidden", "cell"});
}

TEST(GRULayer, MatchesPyTorchTwoLayers) {
  expect_matches_pytorch("gru",
                         "{name: l, type: GRU, num_output: 3, num_layers: 2, "
                         "outputs: [sequence, last]}",
                         {"sequence", "last"});
}

TEST(RNNLayer, MatchesPyTorchReluBidirectionalNoBias) {
  expect_matches_pytorch("rnn_relu",
                         "{name: l, type: RNN, num_output: 5, nonlinearity: relu, bidirectional: "
                         "true, bias_term: false, initial_state: bottom, lengths: true, "
                         "outputs: [last, hidden]}",
                         {"last", "hidden"});
}

// ---- names, shapes, outputs ------------------------------------------------------------------

TEST(LSTMLayer, ParameterNamesAndShapesAsPyTorch) {
  Context ctx;
  LayerHarness h("{name: enc, type: LSTM, num_output: 5, num_layers: 2, bidirectional: true}",
                 {{7, 3, 4}}, ctx);
  const std::vector<std::pair<std::string, Shape>> want = {{"enc.weight_ih_l0", {20, 4}},
                                                           {"enc.weight_hh_l0", {20, 5}},
                                                           {"enc.bias_ih_l0", {20}},
                                                           {"enc.bias_hh_l0", {20}},
                                                           {"enc.weight_ih_l0_reverse", {20, 4}},
                                                           {"enc.weight_hh_l0_reverse", {20, 5}},
                                                           {"enc.bias_ih_l0_reverse", {20}},
                                                           {"enc.bias_hh_l0_reverse", {20}},
                                                           {"enc.weight_ih_l1", {20, 10}},
                                                           {"enc.weight_hh_l1", {20, 5}},
                                                           {"enc.bias_ih_l1", {20}},
                                                           {"enc.bias_hh_l1", {20}},
                                                           {"enc.weight_ih_l1_reverse", {20, 10}},
                                                           {"enc.weight_hh_l1_reverse", {20, 5}},
                                                           {"enc.bias_ih_l1_reverse", {20}},
                                                           {"enc.bias_hh_l1_reverse", {20}}};
  const std::vector<Param>& params = h.layer->params();
  ASSERT_EQ(params.size(), want.size());
  const double bound = 1.0 / std::sqrt(5.0);  // PyTorch's init: U(-1/sqrt(H), 1/sqrt(H))
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(params[i].name, want[i].first);
    EXPECT_EQ(params[i].value.shape(), want[i].second) << want[i].first;
    const std::vector<float> v = params[i].value.to_vector();
    float low = v[0], high = v[0];
    for (float x : v) low = std::min(low, x), high = std::max(high, x);
    EXPECT_GE(low, -bound) << want[i].first;
    EXPECT_LE(high, bound) << want[i].first;
    EXPECT_GT(high - low, bound / 2) << want[i].first << " looks constant";
  }
}

TEST(GRULayer, ParameterShapesWithoutBias) {
  Context ctx;
  LayerHarness h("{name: g, type: GRU, num_output: 2, num_layers: 2, bias_term: false}",
                 {{3, 1, 6}}, ctx);
  const std::vector<Param>& params = h.layer->params();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].name, "g.weight_ih_l0");
  EXPECT_EQ(params[0].value.shape(), (Shape{6, 6}));
  EXPECT_EQ(params[1].name, "g.weight_hh_l0");
  EXPECT_EQ(params[2].name, "g.weight_ih_l1");
  EXPECT_EQ(params[2].value.shape(), (Shape{6, 2}));
  EXPECT_EQ(params[3].value.shape(), (Shape{6, 2}));
}

TEST(RNNLayer, TopShapesAndMultiplyAdds) {
  Context ctx;
  LayerHarness h(
      "{name: r, type: RNN, num_output: 6, num_layers: 2, bidirectional: true, batch_first: "
      "true, outputs: [hidden, sequence, last]}",
      {{3, 5, 4}}, ctx, 3);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{4, 3, 6}));
  EXPECT_EQ(h.top[1]->value.shape(), (Shape{3, 5, 12}));
  EXPECT_EQ(h.top[2]->value.shape(), (Shape{3, 12}));
  // Per step and sequence: D * G * H * (C_l + H) = 2*1*6*(4+6) + 2*1*6*(12+6) = 336; 15 of them.
  EXPECT_EQ(h.layer->multiply_adds(h.bottom, h.top), 15 * 336);
  LayerHarness lstm("{name: l, type: LSTM, num_output: 6, outputs: [sequence, cell]}", {{5, 3, 4}},
                    ctx, 2);
  EXPECT_EQ(lstm.top[1]->value.shape(), (Shape{1, 3, 6}));
  EXPECT_EQ(lstm.layer->multiply_adds(lstm.bottom, lstm.top), 15 * 4 * 6 * (4 + 6));
}

// With lengths and batch_first: y is 0 after each sequence's end; `last` is the forward
// direction's y at its last valid step beside the reverse direction's y at t = 0, and the top
// layer's entries of `hidden` rearranged. Every top is poisoned first.
TEST(LSTMLayer, LastAndPaddingAgreeWithTheSequence) {
  const int64_t N = 3, T = 5, H = 2, D = 2;
  Context ctx;
  LayerHarness h(
      "{name: l, type: LSTM, num_output: 2, num_layers: 2, bidirectional: true, "
      "batch_first: true, lengths: true, outputs: [sequence, last, hidden]}",
      {{N, T, 3}, {N}}, ctx, 3);
  const std::vector<float> lengths = {3, 5, 1};
  fill_inputs(h, lengths, 11);
  for (Blob* t : h.top) t->value.fill(NAN);
  h.forward();
  const std::vector<float> y = h.top[0]->value.to_vector();     // [N, T, D*H]
  const std::vector<float> last = h.top[1]->value.to_vector();  // [N, D*H]
  const std::vector<float> h_n = h.top[2]->value.to_vector();   // [L*D, N, H]
  for (float v : y) ASSERT_FALSE(std::isnan(v));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = int64_t(lengths[size_t(n)]);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t k = 0; k < D * H; ++k) {
        const float v = y[size_t((n * T + t) * D * H + k)];
        EXPECT_EQ(v == 0.0f, t >= len) << "n " << n << " t " << t << ": " << v;
      }
    }
    for (int64_t j = 0; j < H; ++j) {
      const float fwd = last[size_t(n * D * H + j)], rev = last[size_t(n * D * H + H + j)];
      EXPECT_EQ(fwd, y[size_t((n * T + len - 1) * D * H + j)]);
      EXPECT_EQ(rev, y[size_t((n * T + 0) * D * H + H + j)]);
      EXPECT_EQ(fwd, h_n[size_t((2 * N + n) * H + j)]);  // pass 2: layer 1 forward
      EXPECT_EQ(rev, h_n[size_t((3 * N + n) * H + j)]);  // pass 3: layer 1 reverse
    }
  }
}

// The same layer fed x time-major and batch-first gives the same numbers, transposed, and the
// same gradients.
TEST(GRULayer, BatchFirstIsTimeMajorTransposed) {
  const int64_t T = 4, N = 3, C = 2;
  Context ctx;
  const std::string common = "name: g, type: GRU, num_output: 3, bidirectional: true";
  LayerHarness tm("{" + common + "}", {{T, N, C}}, ctx);
  LayerHarness bf("{" + common + ", batch_first: true}", {{N, T, C}}, ctx);
  fill_inputs(tm, {}, 5);
  for (size_t i = 0; i < tm.layer->params().size(); ++i) {
    bf.layer->params()[i].value.copy_from(tm.layer->params()[i].value);
  }
  auto transpose = [](const std::vector<float>& v, int64_t A, int64_t B, int64_t X) {
    std::vector<float> out(v.size());
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t x = 0; x < X; ++x)
          out[size_t((b * A + a) * X + x)] = v[size_t((a * B + b) * X + x)];
    return out;
  };
  bf.set_bottom(0, transpose(tm.bottom[0]->value.to_vector(), T, N, C));
  tm.forward();
  bf.forward();
  EXPECT_EQ(bf.top[0]->value.to_vector(), transpose(tm.top[0]->value.to_vector(), T, N, 6));
  const std::vector<float> dy = random_values(size_t(T * N * 6), -1, 1, 9);
  tm.top[0]->grad.copy_from(Tensor::from_vector({T, N, 6}, dy));
  bf.top[0]->grad.copy_from(Tensor::from_vector({N, T, 6}, transpose(dy, T, N, 6)));
  tm.bottom[0]->grad.fill(NAN);
  bf.bottom[0]->grad.fill(NAN);
  tm.layer->backward(tm.top, {true}, tm.bottom, ctx);
  bf.layer->backward(bf.top, {true}, bf.bottom, ctx);
  EXPECT_EQ(bf.bottom[0]->grad.to_vector(), transpose(tm.bottom[0]->grad.to_vector(), T, N, C));
  for (size_t i = 0; i < tm.layer->params().size(); ++i) {
    EXPECT_EQ(bf.layer->params()[i].grad.to_vector(), tm.layer->params()[i].grad.to_vector());
  }
}

// A frozen parameter's gradient is left alone; the others are the same as without freezing.
TEST(LSTMLayer, FrozenParametersGetNoGradient) {
  Context ctx;
  const std::string common = "name: l, type: LSTM, num_output: 3, num_layers: 2";
  LayerHarness trained("{" + common + "}", {{3, 2, 4}}, ctx);
  LayerHarness frozen(
      "{" + common + ", param: {weight_hh_l0: {lr_mult: 0}, bias_ih_l1: {lr_mult: 0}}}",
      {{3, 2, 4}}, ctx);
  fill_inputs(trained, {}, 4);
  frozen.set_bottom(0, trained.bottom[0]->value.to_vector());
  std::vector<Param>& fp = frozen.layer->params();
  for (size_t i = 0; i < fp.size(); ++i) fp[i].value.copy_from(trained.layer->params()[i].value);
  ASSERT_EQ(fp[1].name, "l.weight_hh_l0");
  ASSERT_EQ(fp[6].name, "l.bias_ih_l1");
  EXPECT_TRUE(fp[1].frozen() && fp[6].frozen());
  const Tensor dy = Tensor::from_vector({3, 2, 3}, random_values(18, -1, 1, 8));
  for (LayerHarness* h : {&trained, &frozen}) {
    h->forward();
    h->top[0]->grad.copy_from(dy);
    for (Param& p : h->layer->params()) p.grad.fill(h == &frozen ? 7.0f : 0.0f);
    h->layer->backward(h->top, {true}, h->bottom, ctx);
  }
  EXPECT_EQ(frozen.bottom[0]->grad.to_vector(), trained.bottom[0]->grad.to_vector());
  for (size_t i = 0; i < fp.size(); ++i) {
    if (fp[i].frozen()) {
      EXPECT_EQ(fp[i].grad.to_vector(), std::vector<float>(size_t(fp[i].grad.numel()), 7.0f));
    } else {
      std::vector<float> want = trained.layer->params()[i].grad.to_vector();
      for (float& w : want) w += 7.0f;  // accumulated onto what was there
      const std::vector<float> got = fp[i].grad.to_vector();
      for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5f) << fp[i].name;
    }
  }
}

// The lengths bottom, when its gradient is asked for, gets zeros: y is piecewise constant in it.
TEST(GRULayer, LengthsGradientIsZero) {
  Context ctx;
  LayerHarness h("{name: g, type: GRU, num_output: 2, lengths: true}", {{3, 2, 2}, {2}}, ctx);
  fill_inputs(h, {2, 3}, 6);
  h.forward();
  h.top[0]->grad.copy_from(Tensor::from_vector({3, 2, 2}, random_values(12, -1, 1, 2)));
  h.bottom[1]->grad.fill(NAN);
  h.layer->backward(h.top, {false, true}, h.bottom, ctx);
  EXPECT_EQ(h.bottom[1]->grad.to_vector(), std::vector<float>(2, 0.0f));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(LSTMLayer, BadKeysAreErrors) {
  const Shape x{4, 2, 3};
  expect_layer_error("{name: l, type: LSTM}", {x}, {"test:1:", "layer 'l' (LSTM)", "num_output"});
  expect_layer_error("{name: l, type: LSTM, num_output: 0}", {x},
                     {"test:1:", "layer 'l' (LSTM)", "num_output", "at least 1"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, num_layers: 0}", {x},
                     {"test:1:", "layer 'l' (LSTM)", "num_layers"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, outputs: [sequence, state]}", {x},
                     {"test:1:", "layer 'l' (LSTM)", "outputs", "'state'"}, 2);
  expect_layer_error("{name: l, type: LSTM, num_output: 2, outputs: [last, last]}", {x},
                     {"layer 'l' (LSTM)", "outputs", "twice"}, 2);
  expect_layer_error("{name: l, type: LSTM, num_output: 2, initial_state: random}", {x},
                     {"test:1:", "layer 'l' (LSTM)", "initial_state", "random"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, nonlinearity: relu}", {x},
                     {"nonlinearity"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, bidirectional: sometimes}", {x},
                     {"bidirectional"});
}

TEST(GRULayer, BadKeysAreErrors) {
  expect_layer_error("{name: g, type: GRU, num_output: 2, outputs: [sequence, cell]}", {{4, 2, 3}},
                     {"test:1:", "layer 'g' (GRU)", "outputs", "cell"}, 2);
  expect_layer_error("{name: g, type: GRU, num_output: -3}", {{4, 2, 3}},
                     {"layer 'g' (GRU)", "num_output"});
}

TEST(RNNLayer, BadKeysAreErrors) {
  expect_layer_error("{name: r, type: RNN, num_output: 2, nonlinearity: sigmoid}", {{4, 2, 3}},
                     {"test:1:", "layer 'r' (RNN)", "nonlinearity", "sigmoid"});
  expect_layer_error("{name: r, type: RNN, num_output: 2, outputs: [hidden, cell]}", {{4, 2, 3}},
                     {"layer 'r' (RNN)", "outputs", "cell"}, 2);
}

TEST(LSTMLayer, BadBottomsAreErrors) {
  expect_layer_error("{name: l, type: LSTM, num_output: 2}", {{4, 6}},
                     {"layer 'l' (LSTM)", "3 axes", "[T, N, C]"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, batch_first: true}", {{4, 2, 3, 1}},
                     {"layer 'l' (LSTM)", "[N, T, C]"});
  // h0 of another batch size, c0 of another layer count.
  expect_layer_error("{name: l, type: LSTM, num_output: 2, initial_state: bottom}",
                     {{4, 2, 3}, {1, 3, 2}, {1, 2, 2}}, {"layer 'l' (LSTM)", "h0", "[1, 2, 2]"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, initial_state: bottom}",
                     {{4, 2, 3}, {1, 2, 2}, {2, 2, 2}}, {"layer 'l' (LSTM)", "c0"});
  expect_layer_error("{name: l, type: LSTM, num_output: 2, lengths: true}", {{4, 2, 3}, {3}},
                     {"layer 'l' (LSTM)", "lengths", "[2]"});
  // The features may not change after setup (the weights were made for them).
  Context ctx;
  LayerHarness h("{name: l, type: LSTM, num_output: 2}", {{4, 2, 3}}, ctx);
  h.bottom[0]->value.reshape({4, 2, 5});
  try {
    h.layer->reshape(h.bottom, h.top, ctx);
    ADD_FAILURE() << "accepted C = 5 after setup with C = 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'l' (LSTM)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("C = 3"), std::string::npos) << e.what();
  }
  // Another T and N are fine.
  h.bottom[0]->value.reshape({7, 1, 3});
  h.layer->reshape(h.bottom, h.top, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{7, 1, 2}));
}

TEST(LSTMLayer, LengthsOutOfRangeAreErrorsNamingTheLayer) {
  for (const std::vector<float>& lengths :
       {std::vector<float>{2, 5}, std::vector<float>{0, 3}, std::vector<float>{3, -1}}) {
    Context ctx;
    LayerHarness h("{name: l, type: LSTM, num_output: 2, lengths: true}", {{4, 2, 3}, {2}}, ctx);
    fill_inputs(h, lengths, 1);
    try {
      h.forward();
      ADD_FAILURE() << "accepted lengths " << lengths[0] << ", " << lengths[1];
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer 'l' (LSTM)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("length"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crema::testing
