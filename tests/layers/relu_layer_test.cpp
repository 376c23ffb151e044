#include <gtest/gtest.h>

#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

TEST(ReLULayer, Gradient) {
  Context ctx;
  LayerHarness h("{name: r, type: ReLU}", {{2, 3, 4}}, ctx);
  h.set_bottom(0, random_values(24, -1, 1, 1));
  GradientCheckOptions options;
  options.kink_range = 0.05;
  check_gradients(h, options);
}

TEST(ReLULayer, LeakyGradient) {
  Context ctx;
  LayerHarness h("{name: r, type: ReLU, negative_slope: 0.1}", {{3, 5}}, ctx);
  h.set_bottom(0, random_values(15, -1, 1, 2));
  GradientCheckOptions options;
  options.kink_range = 0.05;
  check_gradients(h, options);
}

TEST(ReLULayer, InPlaceMatchesOutOfPlace) {
  Context ctx;
  LayerHarness h("{name: r, type: ReLU, negative_slope: 0.25}", {{7}}, ctx);
  const std::vector<float> x = {-2, -1, -0.5, 0.5, 1, 2, 3};
  h.set_bottom(0, x);
  h.forward();
  const auto expected = h.top[0]->value.to_vector();
  // In place: top is the bottom blob.
  std::vector<Blob*> same = {h.bottom[0]};
  h.layer->reshape(same, same, ctx);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), expected);
  h.bottom[0]->grad.fill(1.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), (std::vector<float>{0.25f, 0.25f, 0.25f, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace crema::testing
