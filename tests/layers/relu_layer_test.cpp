#include <gtest/gtest.h>

#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// Inputs within 0.05 of the kink at 0 are skipped: a central difference across it measures
// neither slope.
GradientCheckOptions skip_kink() {
  GradientCheckOptions options;
  options.kink_range = 0.05;
  return options;
}

TEST(ReLULayer, Gradient) {
  const Shape x = {2, 3, 4};
  check_layer_gradients("{name: r, type: ReLU}", x, random_input(x, 1), skip_kink());
}

TEST(ReLULayer, LeakyGradient) {
  const Shape x = {3, 5};
  check_layer_gradients("{name: r, type: ReLU, negative_slope: 0.1}", x, random_input(x, 2),
                        skip_kink());
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
