#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "core/random.h"
#include "tests/fixtures/conv_fixture.h"
#include "tests/support/layer_checks.h"

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
  EXPECT_EQ(top_shape("{name: p, type: Pooling, kernel_size: 3, stride: 2}", {{1, 1, 6, 6}}),
            (Shape{1, 1, 3, 3}));  // Caffe rounds up
  EXPECT_EQ(top_shape("{name: p, type: Pooling, kernel_size: 3, stride: 2, round_mode: floor}",
                      {{1, 1, 6, 6}}),
            (Shape{1, 1, 2, 2}));  // PyTorch rounds down
  EXPECT_EQ(
      top_shape("{name: p, type: Pooling, pool: average, global_pooling: true}", {{2, 3, 5, 4}}),
      (Shape{2, 3, 1, 1}));
}

TEST(PoolingLayer, MaxGradient) {
  Context ctx;
  LayerHarness h("{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2, pad: 1}",
                 {{2, 2, 5, 7}}, ctx, 1, Phase::train, DType::f64);
  h.set_bottom(0, spaced_values(140, 1));
  check_gradients(h);
}

TEST(PoolingLayer, AverageGradient) {
  const Shape x = {2, 3, 5, 6};
  check_layer_gradients(
      "{name: p, type: Pooling, pool: average, kernel_size: [2, 3], stride: 2, pad: 1}", x,
      random_input(x, 2));
}

TEST(PoolingLayer, MaxWithArgmaxTop) {
  Context ctx;
  LayerHarness h("{name: p, type: Pooling, pool: max, kernel_size: 2, stride: 2}", {{1, 1, 2, 4}},
                 ctx, 2);
  h.set_bottom(0, {1, 5, 2, 0, 3, 4, 9, 8});
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), (std::vector<float>{5, 9}));
  EXPECT_EQ(h.top[1]->value.to_vector(), (std::vector<float>{1, 6}));
}

TEST(PoolingLayer, CaffeSeparateHeightAndWidthKeys) {
  EXPECT_EQ(top_shape("{name: p, type: Pooling, kernel_h: 3, kernel_w: 2, stride_h: 2, stride_w: 1,"
                      " pad_h: 1, pad_w: 0, round_mode: floor}",
                      {{1, 1, 7, 5}}),
            (Shape{1, 1, 4, 4}));
}

TEST(PoolingLayer, GradientMaxRectangularCeil) {
  Context ctx;
  LayerHarness h(
      "{name: p, type: Pooling, pool: max, kernel_size: [3, 2], stride: [2, 3],"
      " pad: [1, 1]}",
      {{2, 2, 6, 7}}, ctx, 2, Phase::train, DType::f64);
  h.set_bottom(0, spaced_values(168, 3));
  check_gradients(h);
}

TEST(PoolingLayer, GradientAverageExcludingPadding) {
  const Shape x = {2, 2, 6, 5};
  check_layer_gradients(
      "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
      " count_include_pad: false}",
      x, random_input(x, 4));
}

TEST(PoolingLayer, GradientGlobalMaxAndAverage) {
  for (const char* pool : {"max", "average"}) {
    SCOPED_TRACE(pool);
    Context ctx;
    LayerHarness h(
        std::string("{name: p, type: Pooling, global_pooling: true, pool: ") + pool + "}",
        {{2, 3, 4, 5}}, ctx, 1, Phase::train, DType::f64);
    EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 3, 1, 1}));
    h.set_bottom(0, spaced_values(120, 5));
    check_gradients(h);
  }
}

// Average pooling with padding divides by the window within the padded input by default (Caffe;
// PyTorch's count_include_pad=True), by the window within the input with count_include_pad: false.
TEST(PoolingLayer, AverageDivisorWithAndWithoutPadding) {
  Context ctx;
  const std::vector<float> x = {1, 2, 3, 4};  // 2x2, pooled 2x2/2 with pad 1: four corner windows
  LayerHarness with("{name: p, type: Pooling, pool: average, kernel_size: 2, stride: 2, pad: 1}",
                    {{1, 1, 2, 2}}, ctx);
  with.set_bottom(0, x);
  with.forward();
  EXPECT_EQ(with.top[0]->value.to_vector(), (std::vector<float>{0.25, 0.5, 0.75, 1}));
  LayerHarness without(
      "{name: p, type: Pooling, pool: average, kernel_size: 2, stride: 2, pad: 1,"
      " count_include_pad: false}",
      {{1, 1, 2, 2}}, ctx);
  without.set_bottom(0, x);
  without.forward();
  EXPECT_EQ(without.top[0]->value.to_vector(), x);
}

TEST(PoolingLayer, GoldenMaxCeilMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "maxpool_ceil",
                       "{name: p, type: Pooling, pool: max, kernel_size: 3, stride: 2}", 2);
  check_against_golden(ctx, "maxpool_ceil_pad",
                       "{name: p, type: Pooling, pool: max, kernel_size: [3, 2], stride: 2,"
                       " pad: [1, 1]}",
                       2);
}

TEST(PoolingLayer, GoldenAverageWithPaddingMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "avgpool_pad",
                       "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
                       " round_mode: floor}");
  check_against_golden(
      ctx, "avgpool_pad_ceil",
      "{name: p, type: Pooling, pool: average, kernel_size: 2, stride: 2, pad: 1}");
  check_against_golden(ctx, "avgpool_exclude_pad",
                       "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
                       " count_include_pad: false}");
}

// ---- adaptive pooling (output_size) ----

TEST(PoolingLayer, AdaptiveShapes) {
  EXPECT_EQ(top_shape("{name: p, type: Pooling, pool: average, output_size: 1}", {{2, 3, 7, 5}}),
            (Shape{2, 3, 1, 1}));
  EXPECT_EQ(top_shape("{name: p, type: Pooling, output_size: [3, 4]}", {{2, 3, 7, 5}}),
            (Shape{2, 3, 3, 4}));
  EXPECT_EQ(top_shape("{name: p, type: Pooling, output_size: [6, 6]}", {{1, 2, 3, 3}}),
            (Shape{1, 2, 6, 6}));  // more outputs than inputs, as PyTorch allows
}

// The windows [floor(p*H/P), ceil((p+1)*H/P)): 3 rows to 2 are [0, 2) and [1, 3).
TEST(PoolingLayer, AdaptiveHandComputed) {
  Context ctx;
  LayerHarness avg("{name: p, type: Pooling, pool: average, output_size: 2}", {{1, 1, 3, 3}}, ctx);
  avg.set_bottom(0, {1, 2, 3, 4, 9, 6, 7, 8, 5});
  avg.forward();
  EXPECT_EQ(avg.top[0]->value.to_vector(), (std::vector<float>{4, 5, 7, 7}));
  LayerHarness max("{name: p, type: Pooling, pool: max, output_size: [2, 1]}", {{1, 1, 3, 3}}, ctx,
                   2);
  max.set_bottom(0, {1, 2, 3, 4, 9, 6, 7, 8, 5});
  max.forward();
  EXPECT_EQ(max.top[0]->value.to_vector(), (std::vector<float>{9, 9}));
  EXPECT_EQ(max.top[1]->value.to_vector(), (std::vector<float>{4, 4}));
}

// Unequal, overlapping windows (the adaptive kernels) and divisible sizes (the fixed-window
// kernels the layer picks there), both modes.
TEST(PoolingLayer, GradientAdaptive) {
  for (const char* pool : {"max", "average"}) {
    for (const char* size : {"[3, 4]", "[4, 2]", "1", "[6, 2]"}) {
      const std::string yaml =
          std::string("{name: p, type: Pooling, pool: ") + pool + ", output_size: " + size + "}";
      SCOPED_TRACE(yaml);
      Context ctx;
      LayerHarness h(yaml, {{2, 3, 7, 6}}, ctx, 1, Phase::train, DType::f64);
      h.set_bottom(0, spaced_values(252, 7));
      check_gradients(h);
    }
  }
}

TEST(PoolingLayer, BadKeysNameTheLayerAndTheKey) {
  auto expect_key_error = [](const std::string& keys, const std::string& key) {
    expect_layer_error("{name: p, type: Pooling, " + keys + "}", {{1, 1, 4, 4}},
                       {"layer 'p'", key});
  };
  expect_key_error("pool: median, kernel_size: 2", "pool");
  expect_key_error("kernel_size: 5", "kernel_size");  // larger than the input
  expect_key_error("kernel_size: 0", "kernel_size");
  expect_key_error("kernel_h: 2", "kernel_w");
  expect_key_error("kernel_size: 2, stride: 0", "stride");
  expect_key_error("kernel_size: 2, stride_h: -1, stride_w: 1", "stride_h");
  expect_key_error("kernel_size: 2, pad: -1", "pad");
  expect_key_error("kernel_size: 2, pad: 2", "pad");  // not smaller than the kernel
  expect_key_error("kernel_size: 3, pad_h: 1, pad_w: 3", "pad_w");
  expect_key_error("kernel_size: 2, round_mode: up", "round_mode");
  expect_key_error("global_pooling: true, kernel_size: 2", "kernel_size");
  expect_key_error("global_pooling: true, stride: 2", "stride");
  expect_key_error("output_size: 0", "output_size");
  expect_key_error("output_size: [2, 2, 2]", "output_size");
  expect_key_error("output_size: 2, kernel_size: 2", "kernel_size");
  expect_key_error("output_size: 2, global_pooling: true", "global_pooling");
  expect_key_error("output_size: 2, round_mode: floor", "round_mode");
  // Keys the layer does not read are reported by the config checker (the Net names the layer).
  for (const char* keys :
       {"kernel_size: 2, strde: 2", "pool: max, kernel_size: 2, count_include_pad: false"}) {
    Context ctx;
    EXPECT_THROW(
        LayerHarness(std::string("{name: p, type: Pooling, ") + keys + "}", {{1, 1, 4, 4}}, ctx),
        Error)
        << keys;
  }
}

}  // namespace
}  // namespace crema::testing
