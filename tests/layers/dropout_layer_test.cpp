// Dropout layer. The gradient checks: in the test phase the layer is the identity and the generic
// numerical check applies. In training every forward draws a new mask (the step counter advances),
// so central differences taken through repeated forwards would compare different functions; the
// training test checks instead that the backward applies exactly the last forward's mask and
// factor (dL/dx = dL/dy * y / x), and tests/kernels/dropout_test.cpp checks that relation by
// finite differences at a fixed (seed, step). Also: new masks per forward, the kept fraction,
// same seed same masks, in place, and configuration errors naming the layer and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

// Values away from zero: a kept unit is never 0.
std::vector<float> nonzero(size_t n, uint64_t seed) {
  std::vector<float> v = random_values(n, 0.5f, 1.5f, seed);
  for (size_t i = 0; i < n; i += 2) v[i] = -v[i];
  return v;
}

TEST(DropoutLayer, GradientTestPhaseIsTheIdentity) {
  Context ctx;
  LayerHarness h("{name: drop, type: Dropout, dropout_ratio: 0.3}", {{3, 7}}, ctx, 1, Phase::test,
                 DType::f64);
  const std::vector<float> x = nonzero(21, 1);
  h.set_bottom(0, x);
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), x);
  check_gradients(h);
}

TEST(DropoutLayer, GradientTrainPhaseAppliesTheForwardMask) {
  Context ctx;
  const Shape shape{4, 50};
  LayerHarness h("{name: drop, type: Dropout, dropout_ratio: 0.4}", {shape}, ctx);
  const std::vector<float> x = nonzero(200, 2), dy = random_values(200, -1.0f, 1.0f, 3);
  h.set_bottom(0, x);
  for (int pass = 0; pass < 3; ++pass) {
    h.forward();
    const std::vector<float> y = h.top[0]->value.to_vector();
    h.top[0]->grad.copy_from(Tensor::from_vector(shape, dy));
    h.layer->backward(h.top, {true}, h.bottom, ctx);
    const std::vector<float> dx = h.bottom[0]->grad.to_vector();
    const float scale = 1.0f / (1.0f - 0.4f);
    int kept = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (y[i] != 0.0f) {
        ++kept;
        EXPECT_EQ(y[i], x[i] * scale) << i;
        EXPECT_EQ(dx[i], dy[i] * scale) << i;
      } else {
        EXPECT_EQ(dx[i], 0.0f) << i;
      }
    }
    EXPECT_GT(kept, 80);
    EXPECT_LT(kept, 160);
  }
}

TEST(DropoutLayer, NewMaskEveryTrainingForward) {
  Context ctx;
  LayerHarness h("{name: drop, type: Dropout}", {{64, 64}}, ctx);
  h.set_bottom(0, nonzero(4096, 4));
  h.forward();
  const std::vector<float> first = h.top[0]->value.to_vector();
  h.forward();
  const std::vector<float> second = h.top[0]->value.to_vector();
  EXPECT_NE(first, second);
  int64_t kept = 0;
  for (float v : first) kept += v != 0.0f;
  EXPECT_NEAR(double(kept) / 4096.0, 0.5, 0.04);
}

TEST(DropoutLayer, SameSeedSameMasks) {
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Context ctx(Device::cpu(), 123);
    LayerHarness h("{name: drop, type: Dropout}", {{10, 10}}, ctx);
    h.set_bottom(0, nonzero(100, 5));
    std::vector<float> all;
    for (int pass = 0; pass < 2; ++pass) {
      h.forward();
      const std::vector<float> y = h.top[0]->value.to_vector();
      all.insert(all.end(), y.begin(), y.end());
    }
    runs.push_back(all);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(DropoutLayer, InPlace) {
  Context ctx;
  LayerHarness h("{name: drop, type: Dropout, dropout_ratio: 0.5}", {{5, 8}}, ctx);
  const std::vector<float> x = nonzero(40, 6);
  h.set_bottom(0, x);
  std::vector<Blob*> same = {h.bottom[0]};
  h.layer->reshape(same, same, ctx);
  h.layer->forward(same, same, ctx);
  const std::vector<float> y = h.bottom[0]->value.to_vector();
  h.bottom[0]->grad.copy_from(Tensor::from_vector({5, 8}, std::vector<float>(40, 1.0f)));
  h.layer->backward(same, {true}, same, ctx);
  const std::vector<float> dx = h.bottom[0]->grad.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(y[i] == 0.0f || y[i] == x[i] * 2.0f) << i;
    EXPECT_EQ(dx[i], y[i] != 0.0f ? 2.0f : 0.0f) << i;
  }
}

TEST(DropoutLayer, BadRatioIsAnError) {
  for (const char* ratio : {"1", "1.5", "-0.1"}) {
    const std::string yaml =
        std::string("{name: drop, type: Dropout, dropout_ratio: ") + ratio + "}";
    SCOPED_TRACE(yaml);
    Context ctx;
    try {
      LayerHarness h(yaml, {{2, 3}}, ctx);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const char* part : {"test:1:", "layer 'drop' (Dropout)", "dropout_ratio", "[0, 1)"}) {
        EXPECT_NE(what.find(part), std::string::npos) << what;
      }
    }
  }
}

}  // namespace
}  // namespace crema::testing
