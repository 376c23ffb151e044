#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
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
    LayerHarness h("{name: l, type: SoftmaxWithLoss, ignore_label: 255, normalization: " + mode + "}",
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
  EXPECT_FLOAT_EQ(h2.top[0]->value.to_vector()[0], 2.0f / 3.0f);  // the tie in row 3 counts against it
}

}  // namespace
}  // namespace crema::testing
