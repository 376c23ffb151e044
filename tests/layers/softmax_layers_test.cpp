// Softmax, LogSoftmax, SoftmaxWithLoss (label smoothing), SigmoidCrossEntropyLoss and
// EuclideanLoss layers: numerical gradient checks for every option, golden values from PyTorch
// (tests/fixtures/softmax_fixtures.safetensors, written by make_softmax_fixtures.py), hand-computed
// cases, and the configuration errors (naming the layer and the key).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// --- PyTorch fixtures ---

const SafetensorsFixture& fixtures() {
  static const SafetensorsFixture all("softmax_fixtures.safetensors");
  return all;
}

// An input (stored as F32).
std::vector<float> input(const std::string& name) {
  return fixtures().floats(name);
}

// A golden result (stored as F64).
std::vector<double> golden(const std::string& name) {
  return fixtures().doubles(name);
}

// ||got - want|| / ||want||; NaN in got gives infinity.
double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - want[i];
    diff += std::isnan(got[i]) ? INFINITY : d * d;
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

constexpr double kGoldenTolerance = 1e-5;

// Runs backward with the given top gradients, bottom gradients poisoned; `down` per bottom.
void backward(LayerHarness& h, const std::vector<std::vector<float>>& top_grads,
              const std::vector<bool>& down) {
  for (size_t t = 0; t < top_grads.size(); ++t) {
    set_values(h.top[t]->grad, top_grads[t]);
  }
  for (Blob* b : h.bottom) b->grad.fill(NAN);
  h.layer->backward(h.top, down, h.bottom, h.ctx);
}

// --- Softmax and LogSoftmax ---

// Softmax and LogSoftmax along axis 1, an inner axis and the last axis counted from the end.
TEST(SoftmaxLayer, GradientEveryAxis) {
  check_layer_gradients("{name: s, type: Softmax}", {2, 3, 4, 5}, random_input({2, 3, 4, 5}, 1, 3));
  check_layer_gradients("{name: s, type: Softmax, axis: 2}", {2, 3, 4, 5},
                        random_input({2, 3, 4, 5}, 2, 3));
  check_layer_gradients("{name: s, type: Softmax, axis: -1}", {3, 2, 7},
                        random_input({3, 2, 7}, 3, 3));
}

TEST(LogSoftmaxLayer, GradientEveryAxis) {
  check_layer_gradients("{name: s, type: LogSoftmax}", {2, 3, 4, 5},
                        random_input({2, 3, 4, 5}, 4, 3));
  check_layer_gradients("{name: s, type: LogSoftmax, axis: 2}", {2, 3, 4, 5},
                        random_input({2, 3, 4, 5}, 5, 3));
}

// y and dL/dx for dims 1 and 2 of the same [2, 3, 4, 5] tensor against PyTorch (float64).
void expect_matches_pytorch(const std::string& type, const std::string& name) {
  for (int dim : {1, 2}) {
    SCOPED_TRACE(type + " axis " + std::to_string(dim));
    const std::string key = name + "_dim" + std::to_string(dim);
    Context ctx;
    LayerHarness h("{name: s, type: " + type + ", axis: " + std::to_string(dim) + "}",
                   {{2, 3, 4, 5}}, ctx);
    h.set_bottom(0, input("x4"));
    h.top[0]->value.fill(NAN);
    h.forward();
    EXPECT_LT(rel_error(h.top[0]->value.to_vector(), golden(key + "_y")), kGoldenTolerance);
    backward(h, {input("dy4")}, {true});
    EXPECT_LT(rel_error(h.bottom[0]->grad.to_vector(), golden(key + "_dx")), kGoldenTolerance);
  }
}

TEST(SoftmaxLayer, MatchesPyTorch) {
  expect_matches_pytorch("Softmax", "softmax");
}

TEST(LogSoftmaxLayer, MatchesPyTorch) {
  expect_matches_pytorch("LogSoftmax", "log_softmax");
}

TEST(LogSoftmaxLayer, FiniteWhereSoftmaxUnderflows) {
  Context ctx;
  LayerHarness h("{name: s, type: LogSoftmax}", {{1, 3}}, ctx);
  h.set_bottom(0, {0.0f, -200.0f, 1000.0f});
  h.forward();
  const std::vector<float> y = h.top[0]->value.to_vector();
  EXPECT_FLOAT_EQ(y[0], -1000.0f);
  EXPECT_FLOAT_EQ(y[1], -1200.0f);
  EXPECT_FLOAT_EQ(y[2], 0.0f);
}

TEST(SoftmaxLayer, InPlace) {
  Context ctx;
  LayerHarness h("{name: s, type: Softmax}", {{3, 4}}, ctx);
  const std::vector<float> x = random_values(12, -2, 2, 6), dy = random_values(12, -1, 1, 7);
  h.set_bottom(0, x);
  h.forward();
  backward(h, {dy}, {true});
  const std::vector<float> y = h.top[0]->value.to_vector(), dx = h.bottom[0]->grad.to_vector();
  // The same blob as bottom and top (the Net's in-place form).
  Blob& blob = *h.bottom[0];
  blob.value.copy_from(Tensor::from_vector({3, 4}, x));
  blob.grad.copy_from(Tensor::from_vector({3, 4}, dy));
  h.layer->forward({&blob}, {&blob}, ctx);
  h.layer->backward({&blob}, {true}, {&blob}, ctx);
  EXPECT_EQ(blob.value.to_vector(), y);
  EXPECT_EQ(blob.grad.to_vector(), dx);
}

TEST(SoftmaxLayer, BadAxisNamesLayerAndKey) {
  for (const std::string type : {"Softmax", "LogSoftmax"}) {
    const std::string message =
        layer_error("{name: probs, type: " + type + ", axis: 3}", {{2, 3, 4}});
    EXPECT_NE(message.find("layer 'probs' (" + type + ")"), std::string::npos) << message;
    EXPECT_NE(message.find("axis 3"), std::string::npos) << message;
  }
}

// --- SoftmaxWithLoss: label smoothing and spatial losses ---

TEST(SoftmaxWithLossLayer, GradientLabelSmoothing) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss, label_smoothing: 0.2}", {{4, 5}, {4}}, ctx, 1,
                 Phase::train, DType::f64);
  h.set_bottom(0, random_values(20, -2, 2, 8));
  h.set_bottom(1, {0, 4, 2, 2});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

TEST(SoftmaxWithLossLayer, GradientLabelSmoothingSpatialIgnoreLabel) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss, label_smoothing: 0.3, ignore_label: 255}",
                 {{2, 3, 2, 3}, {2, 2, 3}}, ctx, 1, Phase::train, DType::f64);
  h.set_bottom(0, random_values(36, -2, 2, 9));
  h.set_bottom(1, {0, 1, 255, 2, 2, 1, 255, 0, 1, 2, 0, 0});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

TEST(SoftmaxWithLossLayer, GradientAxis2) {
  Context ctx;  // classes along axis 2 of [2, 3, 4]: labels [2, 3]
  LayerHarness h("{name: l, type: SoftmaxWithLoss, axis: 2, label_smoothing: 0.1}",
                 {{2, 3, 4}, {2, 3}}, ctx, 1, Phase::train, DType::f64);
  h.set_bottom(0, random_values(24, -2, 2, 10));
  h.set_bottom(1, {3, 0, 1, 2, 2, 0});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

// The loss and its gradient (loss weight 1) against F.cross_entropy(label_smoothing, ignore_index).
void expect_cross_entropy_matches(const std::string& key, const std::string& yaml,
                                  const std::vector<Shape>& shapes) {
  SCOPED_TRACE(key);
  Context ctx;
  LayerHarness h(yaml, shapes, ctx);
  h.set_bottom(0, input(key + "_logits"));
  h.set_bottom(1, input(key + "_labels"));
  h.forward();
  const double want = golden(key + "_loss")[0];
  EXPECT_NEAR(h.top[0]->value.to_vector()[0], want, kGoldenTolerance * std::abs(want));
  backward(h, {{1.0f}}, {true, false});
  EXPECT_LT(rel_error(h.bottom[0]->grad.to_vector(), golden(key + "_dlogits")), kGoldenTolerance);
}

TEST(SoftmaxWithLossLayer, LabelSmoothingMatchesPyTorch) {
  expect_cross_entropy_matches(
      "ce", "{name: l, type: SoftmaxWithLoss, label_smoothing: 0.1, ignore_label: 255}",
      {{6, 7}, {6}});
  expect_cross_entropy_matches(
      "ce2", "{name: l, type: SoftmaxWithLoss, label_smoothing: 0.25, ignore_label: 255}",
      {{2, 4, 3, 5}, {2, 3, 5}});
}

TEST(SoftmaxWithLossLayer, ZeroLabelSmoothingIsThePlainLoss) {
  Context ctx;
  const std::vector<float> x = random_values(15, -3, 3, 11);
  const std::vector<float> labels = {2, 0, 4};
  std::vector<std::vector<float>> results;
  for (const std::string yaml : {"{name: l, type: SoftmaxWithLoss}",
                                 "{name: l, type: SoftmaxWithLoss, label_smoothing: 0}"}) {
    LayerHarness h(yaml, {{3, 5}, {3}}, ctx);
    h.set_bottom(0, x);
    h.set_bottom(1, labels);
    h.forward();
    backward(h, {{1.0f}}, {true, false});
    results.push_back(h.top[0]->value.to_vector());
    results.push_back(h.bottom[0]->grad.to_vector());
  }
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(results[1], results[3]);
}

TEST(SoftmaxWithLossLayer, BadLabelSmoothingNamesLayerAndKey) {
  for (const std::string value : {"1", "1.5", "-0.1"}) {
    const std::string message = layer_error(
        "{name: xent, type: SoftmaxWithLoss, label_smoothing: " + value + "}", {{2, 3}, {2}});
    EXPECT_NE(message.find("layer 'xent' (SoftmaxWithLoss)"), std::string::npos) << message;
    EXPECT_NE(message.find("label_smoothing"), std::string::npos) << message;
    EXPECT_NE(message.find("test:1:"), std::string::npos) << message;  // the file location
  }
}

// --- SigmoidCrossEntropyLoss ---

TEST(SigmoidCrossEntropyLossLayer, Gradient) {
  Context ctx;
  LayerHarness h("{name: l, type: SigmoidCrossEntropyLoss}", {{3, 2, 4}, {3, 2, 4}}, ctx, 1,
                 Phase::train, DType::f64);
  h.set_bottom(0, random_values(24, -4, 4, 12));
  h.set_bottom(1, random_values(24, 0, 1, 13));
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

TEST(SigmoidCrossEntropyLossLayer, GradientIgnoreLabelValid) {
  Context ctx;
  LayerHarness h("{name: l, type: SigmoidCrossEntropyLoss, ignore_label: -1, normalization: valid}",
                 {{2, 5}, {2, 5}}, ctx, 1, Phase::train, DType::f64);
  h.set_bottom(0, random_values(10, -4, 4, 14));
  h.set_bottom(1, {1, 0, -1, 1, 0, -1, -1, 0, 1, 1});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
  // Ignored elements get no gradient.
  backward(h, {{1.0f}}, {true, false});
  const std::vector<float> dx = h.bottom[0]->grad.to_vector();
  EXPECT_EQ(dx[2], 0.0f);
  EXPECT_EQ(dx[5], 0.0f);
  EXPECT_EQ(dx[6], 0.0f);
}

TEST(SigmoidCrossEntropyLossLayer, Normalizations) {
  Context ctx;
  const std::vector<float> x = random_values(12, -3, 3, 15);
  const std::vector<float> t = {1, 0, 7, 1, 0.25f, 0, 1, 7, 0, 1, 0.5f, 1};  // 7 is ignored
  auto loss = [&](const std::string& mode) {
    LayerHarness h(
        "{name: l, type: SigmoidCrossEntropyLoss, ignore_label: 7, normalization: " + mode + "}",
        {{4, 3}, {4, 3}}, ctx);
    h.set_bottom(0, x);
    h.set_bottom(1, t);
    h.forward();
    return double(h.top[0]->value.to_vector()[0]);
  };
  double sum = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (t[k] == 7) continue;
    const double s = 1 / (1 + std::exp(-double(x[k])));
    sum -= t[k] * std::log(s) + (1 - t[k]) * std::log(1 - s);
  }
  EXPECT_NEAR(loss("none"), sum, 1e-5);
  EXPECT_NEAR(loss("valid"), sum / 10, 1e-6);
  EXPECT_NEAR(loss("batch_size"), sum / 4, 1e-6);
  EXPECT_NEAR(loss("full"), sum / 12, 1e-6);
}

TEST(SigmoidCrossEntropyLossLayer, MatchesPyTorch) {
  const std::vector<double> want_loss = golden("bce_loss_mean"), want_dx = golden("bce_dx_mean");
  // normalization full is BCEWithLogitsLoss's mean; Caffe's default (batch_size) divides by N = 3
  // instead of the 60 elements.
  for (const auto& [yaml, factor] : std::vector<std::pair<std::string, double>>{
           {"{name: l, type: SigmoidCrossEntropyLoss, normalization: full}", 1.0},
           {"{name: l, type: SigmoidCrossEntropyLoss}", 20.0}}) {
    SCOPED_TRACE(yaml);
    Context ctx;
    LayerHarness h(yaml, {{3, 4, 5}, {3, 4, 5}}, ctx);
    h.set_bottom(0, input("bce_x"));
    h.set_bottom(1, input("bce_t"));
    h.forward();
    EXPECT_NEAR(h.top[0]->value.to_vector()[0], factor * want_loss[0],
                kGoldenTolerance * factor * want_loss[0]);
    backward(h, {{1.0f}}, {true, false});
    std::vector<double> want = want_dx;
    for (double& d : want) d *= factor;
    EXPECT_LT(rel_error(h.bottom[0]->grad.to_vector(), want), kGoldenTolerance);
  }
}

TEST(SigmoidCrossEntropyLossLayer, Errors) {
  const std::string bad_mode = layer_error(
      "{name: bce, type: SigmoidCrossEntropyLoss, normalization: mean}", {{2, 3}, {2, 3}});
  EXPECT_NE(bad_mode.find("layer 'bce' (SigmoidCrossEntropyLoss)"), std::string::npos) << bad_mode;
  EXPECT_NE(bad_mode.find("normalization"), std::string::npos) << bad_mode;
  const std::string bad_count =
      layer_error("{name: bce, type: SigmoidCrossEntropyLoss}", {{2, 3}, {2, 2}});
  EXPECT_NE(bad_count.find("as many elements"), std::string::npos) << bad_count;
  // Targets of another shape but as many elements are fine (as Caffe).
  EXPECT_EQ(layer_error("{name: bce, type: SigmoidCrossEntropyLoss}", {{2, 3}, {6}}), "");
}

// --- EuclideanLoss ---

TEST(EuclideanLossLayer, GradientBothBottoms) {
  Context ctx;
  LayerHarness h("{name: l, type: EuclideanLoss}", {{3, 2, 3}, {3, 2, 3}}, ctx, 1, Phase::train,
                 DType::f64);
  h.set_bottom(0, random_values(18, -2, 2, 16));
  h.set_bottom(1, random_values(18, -2, 2, 17));
  check_gradients(h);
}

TEST(EuclideanLossLayer, GradientFullNormalizationOneBottom) {
  Context ctx;
  LayerHarness h("{name: l, type: EuclideanLoss, normalization: full}", {{5, 3}, {15}}, ctx, 1,
                 Phase::train, DType::f64);
  h.set_bottom(0, random_values(15, -2, 2, 18));
  h.set_bottom(1, random_values(15, -2, 2, 19));
  GradientCheckOptions options;
  options.check_bottom = {false, true};
  check_gradients(h, options);
  // The other bottom's gradient is not written.
  backward(h, {{1.0f}}, {false, true});
  EXPECT_TRUE(std::isnan(h.bottom[0]->grad.to_vector()[0]));
}

TEST(EuclideanLossLayer, CaffeDefaultByHand) {
  Context ctx;
  LayerHarness h("{name: l, type: EuclideanLoss}", {{2, 2}, {2, 2}}, ctx);
  h.set_bottom(0, {1, 2, 3, 4});
  h.set_bottom(1, {0, 0, 1, 7});
  h.forward();
  // (1 + 4 + 4 + 9) / (2 * 2)
  EXPECT_FLOAT_EQ(h.top[0]->value.to_vector()[0], 4.5f);
  backward(h, {{2.0f}}, {true, true});
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), (std::vector<float>{1, 2, 2, -3}));
  EXPECT_EQ(h.bottom[1]->grad.to_vector(), (std::vector<float>{-1, -2, -2, 3}));
}

TEST(EuclideanLossLayer, MatchesPyTorchMse) {
  // MSELoss(mean) = sum / numel = 2 * (EuclideanLoss with normalization: full); with the top's
  // gradient (the loss weight) 2, the bottom gradients are MSELoss's.
  Context ctx;
  LayerHarness h("{name: l, type: EuclideanLoss, normalization: full}", {{4, 3, 5}, {4, 3, 5}},
                 ctx);
  h.set_bottom(0, input("mse_a"));
  h.set_bottom(1, input("mse_b"));
  h.forward();
  const double want = golden("mse_loss_mean")[0];
  EXPECT_NEAR(2.0 * h.top[0]->value.to_vector()[0], want, kGoldenTolerance * want);
  backward(h, {{2.0f}}, {true, true});
  EXPECT_LT(rel_error(h.bottom[0]->grad.to_vector(), golden("mse_da")), kGoldenTolerance);
  EXPECT_LT(rel_error(h.bottom[1]->grad.to_vector(), golden("mse_db")), kGoldenTolerance);
}

TEST(EuclideanLossLayer, Errors) {
  const std::string bad_mode =
      layer_error("{name: l2, type: EuclideanLoss, normalization: mse}", {{2, 3}, {2, 3}});
  EXPECT_NE(bad_mode.find("layer 'l2' (EuclideanLoss)"), std::string::npos) << bad_mode;
  EXPECT_NE(bad_mode.find("normalization"), std::string::npos) << bad_mode;
  const std::string bad_count = layer_error("{name: l2, type: EuclideanLoss}", {{2, 3}, {5}});
  EXPECT_NE(bad_count.find("as many elements"), std::string::npos) << bad_count;
}

}  // namespace
}  // namespace crema::testing
