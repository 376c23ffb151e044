#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

TEST(SoftmaxWithLossLayer, ValueMatchesDefinition) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss}", {{2, 3}, {2}}, ctx);
  h.set_bottom(0, {1, 2, 3, 0, 0, 0});
  h.set_bottom(1, {2, 0});
  h.forward();
  const double l0 = -std::log(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double l1 = -std::log(1.0 / 3.0);
  EXPECT_NEAR(h.top[0]->value.to_vector()[0], (l0 + l1) / 2, 1e-6);
}

TEST(SoftmaxWithLossLayer, Gradient) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss}", {{4, 5}, {4}}, ctx, 1, Phase::train,
                 DType::f64);
  h.set_bottom(0, random_values(20, -2, 2, 1));
  h.set_bottom(1, {0, 4, 2, 2});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

TEST(SoftmaxWithLossLayer, SpatialGradientWithIgnoreLabel) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss, ignore_label: 255, normalization: batch_size}",
                 {{2, 3, 2, 2}, {2, 1, 2, 2}}, ctx, 1, Phase::train, DType::f64);
  h.set_bottom(0, random_values(24, -2, 2, 2));
  h.set_bottom(1, {0, 1, 255, 2, 2, 255, 1, 0});
  GradientCheckOptions options;
  options.check_bottom = {true, false};
  check_gradients(h, options);
}

TEST(SoftmaxWithLossLayer, Normalizations) {
  Context ctx;
  const std::vector<float> x = random_values(12, -1, 1, 3);
  const std::vector<float> labels = {0, 255, 1, 2};
  auto loss = [&](const std::string& mode) {
    LayerHarness h(
        "{name: l, type: SoftmaxWithLoss, ignore_label: 255, normalization: " + mode + "}",
        {{4, 3}, {4}}, ctx);
    h.set_bottom(0, x);
    h.set_bottom(1, labels);
    h.forward();
    return double(h.top[0]->value.to_vector()[0]);
  };
  const double none = loss("none");
  EXPECT_NEAR(loss("valid"), none / 3, 1e-6);
  EXPECT_NEAR(loss("batch_size"), none / 4, 1e-6);
  EXPECT_NEAR(loss("full"), none / 4, 1e-6);
}

TEST(SoftmaxWithLossLayer, LabelCountMismatchIsAnError) {
  Context ctx;
  EXPECT_THROW(LayerHarness("{name: l, type: SoftmaxWithLoss}", {{4, 5}, {3}}, ctx), Error);
}

// Soft targets of the logits' shape (mixup's): the value by the definition, the gradient by
// central differences, with label smoothing and over a spatial axis.
TEST(SoftmaxWithLossLayer, SoftTargetsValueMatchesDefinition) {
  Context ctx;
  LayerHarness h("{name: l, type: SoftmaxWithLoss}", {{2, 3}, {2, 3}}, ctx);
  h.set_bottom(0, {1, 2, 3, 0, 0, 0});
  h.set_bottom(1, {0.25f, 0, 0.75f, 0.5f, 0.5f, 0});
  h.forward();
  const double log_s0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double l0 = -(0.25 * (1 - log_s0) + 0.75 * (3 - log_s0));
  const double l1 = -std::log(1.0 / 3.0);
  EXPECT_NEAR(h.top[0]->value.to_vector()[0], (l0 + l1) / 2, 1e-6);
}

TEST(SoftmaxWithLossLayer, SoftTargetsGradient) {
  Context ctx;
  for (const std::string yaml : {"{name: l, type: SoftmaxWithLoss, label_smoothing: 0.1}",
                                 "{name: l, type: SoftmaxWithLoss, normalization: none}"}) {
    SCOPED_TRACE(yaml);
    LayerHarness h(yaml, {{2, 3, 2, 2}, {2, 3, 2, 2}}, ctx);
    h.set_bottom(0, random_values(24, -2, 2, 4));
    h.set_bottom(1, random_values(24, 0, 1, 5));
    GradientCheckOptions options;
    options.check_bottom = {true, false};
    check_gradients(h, options);
  }
}

TEST(SoftmaxWithLossLayer, SoftTargetsHaveNoIgnoreLabel) {
  Context ctx;
  EXPECT_CONTAINS(
      error_of([&] {
        LayerHarness("{name: l, type: SoftmaxWithLoss, ignore_label: 255}", {{4, 5}, {4, 5}}, ctx);
      }),
      "are soft (one probability per class), which have no ignore_label");
}

TEST(AccuracyLayer, SoftTargetsScoreTheirLargestClass) {
  Context ctx;
  LayerHarness h("{name: a, type: Accuracy}", {{3, 3}, {3, 3}}, ctx);
  h.set_bottom(0, {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.3f, 0.3f, 0.4f});
  // Largest targets: class 1 (mixed 0.6 / 0.4), class 2, class 2.
  h.set_bottom(1, {0.4f, 0.6f, 0, 0, 0.3f, 0.7f, 0, 0, 1});
  h.forward();
  EXPECT_FLOAT_EQ(h.top[0]->value.to_vector()[0], 2.0f / 3.0f);
}

TEST(AccuracyLayer, TopOneAndTopTwo) {
  Context ctx;
  LayerHarness h1("{name: a, type: Accuracy}", {{3, 3}, {3}}, ctx);
  LayerHarness h2("{name: a, type: Accuracy, top_k: 2}", {{3, 3}, {3}}, ctx);
  const std::vector<float> scores = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.3f, 0.3f, 0.4f};
  const std::vector<float> labels = {1, 1, 0};
  for (LayerHarness* h : {&h1, &h2}) {
    h->set_bottom(0, scores);
    h->set_bottom(1, labels);
    h->forward();
  }
  EXPECT_FLOAT_EQ(h1.top[0]->value.to_vector()[0], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(h2.top[0]->value.to_vector()[0],
                  2.0f / 3.0f);  // the tie in row 3 counts against it
}

}  // namespace
}  // namespace crema::testing
