// The StochasticDepth layer. As for Dropout (dropout_layer_test.cpp), the numerical gradient check
// applies in the test phase, where the layer is the identity; in training each forward draws new
// samples, so the check is that the backward applies exactly the last forward's mask and factor
// (tests/kernels/stochastic_depth_test.cpp checks the kernel). Also: whole samples kept or
// dropped, batch mode, p = 0, in place, the counter in the run state, and errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

TEST(StochasticDepthLayer, GradientTestPhaseIsTheIdentity) {
  Context ctx;
  LayerHarness h("{name: sd, type: StochasticDepth, p: 0.2}", {{3, 4, 2, 2}}, ctx, 1, Phase::test,
                 DType::f64);
  const std::vector<float> x = random_values(48, -1, 1, 1);
  h.set_bottom(0, x);
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), x);
  check_gradients(h);
}

// Every sample all kept (x / (1 - p)) or all zero, the backward the same mask on dy; a new draw
// per forward.
TEST(StochasticDepthLayer, GradientTrainPhaseAppliesTheForwardRows) {
  Context ctx;
  const Shape shape{64, 3, 2, 5};
  const int64_t row = 30;
  LayerHarness h("{name: sd, type: StochasticDepth, p: 0.25}", {shape}, ctx);
  const std::vector<float> x = random_values(64 * row, 0.5f, 1.5f, 2);
  const std::vector<float> dy = random_values(64 * row, -1, 1, 3);
  h.set_bottom(0, x);
  std::vector<float> previous;
  for (int pass = 0; pass < 3; ++pass) {
    h.forward();
    const std::vector<float> y = h.top[0]->value.to_vector();
    h.top[0]->grad.copy_from(Tensor::from_vector(shape, dy));
    h.layer->backward(h.top, {true}, h.bottom, ctx);
    const std::vector<float> dx = h.bottom[0]->grad.to_vector();
    const float scale = 1.0f / (1.0f - 0.25f);
    int kept = 0;
    for (int64_t n = 0; n < 64; ++n) {
      const bool keep = y[size_t(n * row)] != 0.0f;
      kept += keep;
      for (int64_t i = n * row; i < (n + 1) * row; ++i) {
        EXPECT_EQ(y[size_t(i)], keep ? x[size_t(i)] * scale : 0.0f) << i;
        EXPECT_EQ(dx[size_t(i)], keep ? dy[size_t(i)] * scale : 0.0f) << i;
      }
    }
    EXPECT_GT(kept, 32);
    EXPECT_LT(kept, 64);
    EXPECT_NE(y, previous);
    previous = y;
  }
}

TEST(StochasticDepthLayer, BatchModeDrawsOnceForAll) {
  Context ctx;
  LayerHarness h("{name: sd, type: StochasticDepth, p: 0.5, mode: batch}", {{8, 3}}, ctx);
  const std::vector<float> x = random_values(24, 0.5f, 1.5f, 4);
  h.set_bottom(0, x);
  int all_kept = 0, all_dropped = 0;
  for (int pass = 0; pass < 40; ++pass) {
    h.forward();
    const std::vector<float> y = h.top[0]->value.to_vector();
    int zeros = 0;
    for (float v : y) zeros += v == 0.0f;
    ASSERT_TRUE(zeros == 0 || zeros == 24);
    (zeros == 0 ? all_kept : all_dropped)++;
  }
  EXPECT_GT(all_kept, 5);
  EXPECT_GT(all_dropped, 5);
}

TEST(StochasticDepthLayer, ZeroProbabilityAndInPlace) {
  Context ctx;
  LayerHarness h("{name: sd, type: StochasticDepth, p: 0}", {{4, 5}}, ctx);
  const std::vector<float> x = random_values(20, -1, 1, 5);
  h.set_bottom(0, x);
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), x);

  LayerHarness in_place("{name: sd, type: StochasticDepth, p: 0.5}", {{16, 3}}, ctx);
  in_place.set_bottom(0, std::vector<float>(48, 1.0f));
  std::vector<Blob*> same = {in_place.bottom[0]};
  in_place.layer->reshape(same, same, ctx);
  in_place.layer->forward(same, same, ctx);
  const std::vector<float> y = in_place.bottom[0]->value.to_vector();
  in_place.bottom[0]->grad.copy_from(Tensor::from_vector({16, 3}, std::vector<float>(48, 1.0f)));
  in_place.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(in_place.bottom[0]->grad.to_vector(), y);  // the same mask, the same factor 2
  EXPECT_EQ(in_place.layer->run_state().size(), 1u);
}

TEST(StochasticDepthLayer, Errors) {
  expect_layer_error("{name: sd, type: StochasticDepth}", {{2, 3}}, {"layer 'sd'", "p"});
  expect_layer_error("{name: sd, type: StochasticDepth, p: 1}", {{2, 3}}, {"layer 'sd'", "p"});
  expect_layer_error("{name: sd, type: StochasticDepth, p: 0.1, mode: all}", {{2, 3}},
                     {"layer 'sd'", "mode"});
}

}  // namespace
}  // namespace crema::testing
