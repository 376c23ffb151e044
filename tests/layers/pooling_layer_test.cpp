#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "core/random.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

// Distinct values spaced far more than the finite-difference step, so no perturbation changes
// which element is the maximum.
std::vector<float> spaced_values(size_t count, uint64_t seed) {
  std::vector<float> v(count);
  std::iota(v.begin(), v.end(), 0.0f);
  Random random(seed);
  for (size_t i = count; i > 1; --i) std::swap(v[i - 1], v[random.below(i)]);
  for (float& x : v) x = x * 0.1f - float(count) * 0.05f;
  return v;
}

TEST(PoolingLayer, CeilAndFloorShapes) {
  Context ctx;
  LayerHarness ceil("{name: p, type: Pooling, kernel_size: 3, stride: 2}", {{1, 1, 6, 6}}, ctx);
  EXPECT_EQ(ceil.top[0]->value.shape(), (Shape{1, 1, 3, 3}));  // Caffe rounds up
  LayerHarness floor("{name: p, type: Pooling, kernel_size: 3, stride: 2, round_mode: floor}", {{1, 1, 6, 6}}, ctx);
  EXPECT_EQ(floor.top[0]->value.shape(), (Shape{1, 1, 2, 2}));  // PyTorch rounds down
  LayerHarness global("{name: p, type: Pooling, pool: average, global_pooling: true}", {{2, 3, 5, 4}}, ctx);
  EXPECT_EQ(global.top[0]->value.shape(), (Shape{2, 3, 1, 1}));
}

TEST(PoolingLayer, MaxGradient) {
  Context ctx;
  LayerHarness h("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2, pad: 1}", {{2, 2, 5, 7}}, ctx);
  h.set_bottom(0, spaced_values(140, 1));
  check_gradients(h);
}

TEST(PoolingLayer, AverageGradient) {
  Context ctx;
  LayerHarness h("{name: p, type: Pooling, pool: average, kernel_size: [2, 3], stride: 2, pad: 1}",
                 {{2, 3, 5, 6}}, ctx);
  h.set_bottom(0, random_values(180, -1, 1, 2));
  check_gradients(h);
}

TEST(PoolingLayer, MaxWithArgmaxTop) {
  Context ctx;
  LayerHarness h("{name: p, type: Pooling, pool: max, kernel_size: 2, stride: 2}", {{1, 1, 2, 4}}, ctx, 2);
  h.set_bottom(0, {1, 5, 2, 0, 3, 4, 9, 8});
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), (std::vector<float>{5, 9}));
  EXPECT_EQ(h.top[1]->value.to_vector(), (std::vector<float>{1, 6}));
}

TEST(PoolingLayer, BadKeysAreErrors) {
  Context ctx;
  EXPECT_THROW(LayerHarness("{name: p, type: Pooling, pool: median, kernel_size: 2}", {{1, 1, 4, 4}}, ctx), Error);
  EXPECT_THROW(LayerHarness("{name: p, type: Pooling, kernel_size: 5}", {{1, 1, 4, 4}}, ctx), Error);
  EXPECT_THROW(LayerHarness("{name: p, type: Pooling, kernel_size: 2, strde: 2}", {{1, 1, 4, 4}}, ctx), Error);
}

}  // namespace
}  // namespace crema::testing
