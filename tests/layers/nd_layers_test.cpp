// Convolution and Pooling on 1-D ([N, C, L]) and 3-D ([N, C, D, H, W]) inputs: shapes from the
// list keys, numerical gradient checks of every option, and the errors of sizes that do not fit
// the input's spatial rank.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

TEST(ConvolutionNdLayer, ShapesFromListKeys) {
  Context ctx;
  LayerHarness c3(
      "{name: c, type: Convolution, num_output: 4, kernel_size: [3, 3, 2], stride: [1, 2, 2],"
      " pad: [1, 1, 0], dilation: [2, 1, 1]}",
      {{2, 3, 6, 7, 8}}, ctx);
  // D: (6 + 2 - 2*2 - 1) / 1 + 1 = 4; H: (7 + 2 - 3) / 2 + 1 = 4; W: (8 - 2) / 2 + 1 = 4.
  EXPECT_EQ(c3.top[0]->value.shape(), (Shape{2, 4, 4, 4, 4}));
  EXPECT_EQ(c3.layer->params()[0].value.shape(), (Shape{4, 3, 3, 3, 2}));
  LayerHarness c1("{name: c, type: Convolution, num_output: 5, kernel_size: 3, stride: 2}",
                  {{2, 3, 11}}, ctx);
  EXPECT_EQ(c1.top[0]->value.shape(), (Shape{2, 5, 5}));
  EXPECT_EQ(c1.layer->params()[0].value.shape(), (Shape{5, 3, 3}));
}

TEST(ConvolutionNdLayer, Gradient1d) {
  const std::string uniform_bias = "bias_filler: {type: uniform, min: -1, max: 1}";
  check_gradient_cases(
      "name: c, type: Convolution",
      {{"num_output: 3, kernel_size: 3, stride: 2, pad: 1, " + uniform_bias, {2, 2, 9}},
       {"num_output: 4, kernel_size: [2], dilation: 2, group: 2, bias_term: false", {1, 4, 7}},
       {"num_output: 3, kernel_size: 3, group: 3, pad: [2], " + uniform_bias, {2, 3, 6}}});
}

TEST(ConvolutionNdLayer, Gradient3d) {
  const std::string uniform_bias = "bias_filler: {type: uniform, min: -1, max: 1}";
  check_gradient_cases(
      "name: c, type: Convolution",
      {{"num_output: 3, kernel_size: [3, 2, 3], stride: [1, 2, 2], pad: [1, 0, 1], " + uniform_bias,
        {2, 2, 4, 5, 5}},
       {"num_output: 4, kernel_size: 2, dilation: [1, 2, 1], group: 2, bias_term: false",
        {1, 4, 3, 5, 4}},
       {"num_output: 2, kernel_size: 3, group: 2, stride: 2, pad: 1, " + uniform_bias,
        {1, 2, 3, 4, 5}},
       {"num_output: 3, kernel_size: 1, " + uniform_bias, {2, 2, 2, 3, 2}}});
}

TEST(ConvolutionNdLayer, SizesThatDoNotFitTheRankNameTheLayerAndKey) {
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: [3, 3]}",
                     {{1, 2, 9}},
                     {"layer 'c' (Convolution): kernel_size: 2 entries for the 1 spatial axis "
                      "of the input [1, 2, 9]; give one value, or one per spatial axis"});
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: 3, stride: [1, 2]}",
                     {{1, 2, 5, 5, 5}},
                     {"layer 'c'", "stride: 2 entries for the 3 spatial axes of the input"});
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: [3, 3, 3]}",
                     {{1, 2, 5, 5}}, {"layer 'c'", "kernel_size: 3 entries for the 2 spatial"});
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: [3, 3, 3, 3]}",
                     {{1, 2, 5, 5, 5}}, {"layer 'c'", "kernel_size", "a list of 1 to 3"});
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: 1}",
                     {{1, 2, 5, 5, 5, 5}},
                     {"layer 'c'", "5-D [N, C, D, H, W]", "[1, 2, 5, 5, 5, 5]"});
  expect_layer_error("{name: c, type: Convolution, num_output: 2, kernel_size: 3, pad: [0, 0, 0]}",
                     {{1, 2, 2, 5, 5}}, {"layer 'c'", "larger than the padded input"});
  expect_layer_error("{name: d, type: Deconvolution, num_output: 2, kernel_size: [3, 3, 3]}",
                     {{1, 2, 5, 5}},
                     {"layer 'd'",
                      "kernel_size: 3 entries for the 2 spatial axes "
                      "of a Deconvolution (2-D only)"});
}

TEST(PoolingNdLayer, ShapesFromListKeys) {
  Context ctx;
  LayerHarness p3("{name: p, type: Pooling, pool: max, kernel_size: [1, 2, 2], stride: [1, 2, 2]}",
                  {{2, 3, 5, 7, 8}}, ctx, 2);
  EXPECT_EQ(p3.top[0]->value.shape(), (Shape{2, 3, 5, 4, 4}));  // ceil: 7 -> 4
  EXPECT_EQ(p3.top[1]->value.shape(), (Shape{2, 3, 5, 4, 4}));  // the argmax
  LayerHarness p1(
      "{name: p, type: Pooling, pool: average, kernel_size: 3, stride: 2, pad: 1,"
      " round_mode: floor}",
      {{2, 3, 10}}, ctx);
  EXPECT_EQ(p1.top[0]->value.shape(), (Shape{2, 3, 5}));
  LayerHarness global("{name: p, type: Pooling, pool: average, global_pooling: true}",
                      {{2, 3, 3, 4, 5}}, ctx);
  EXPECT_EQ(global.top[0]->value.shape(), (Shape{2, 3, 1, 1, 1}));
}

TEST(PoolingNdLayer, AverageGradient1dAnd3d) {
  check_gradient_cases(
      "name: p, type: Pooling, pool: average",
      {{"kernel_size: [3], stride: 2, pad: 1, count_include_pad: false", {2, 2, 8}},
       {"kernel_size: 4, stride: 3, round_mode: floor", {1, 3, 11}},
       {"kernel_size: 2, stride: 2, pad: 1", {1, 2, 3, 4, 5}},
       {"kernel_size: [3, 2, 2], stride: [2, 1, 2], pad: [1, 0, 1], count_include_pad: false",
        {2, 1, 5, 3, 4}}});
}

// Distinct values spaced far more than the finite-difference step, so no perturbation changes
// which element is the maximum (as pooling_layer_test.cpp's).
std::vector<float> spaced_values(size_t count, uint64_t seed) {
  std::vector<float> v(count);
  std::iota(v.begin(), v.end(), 0.0f);
  Random random(seed);
  for (size_t i = count; i > 1; --i) std::swap(v[i - 1], v[random.below(i)]);
  for (float& x : v) x = x * 0.1f - float(count) * 0.05f;
  return v;
}

TEST(PoolingNdLayer, MaxGradient1dAnd3d) {
  const std::vector<GradientCase> cases = {
      {"kernel_size: 3, stride: 2, pad: 1", {2, 2, 9}},
      {"kernel_size: [2, 3, 2], stride: [1, 2, 2], pad: [0, 1, 1]", {2, 2, 3, 5, 4}},
      {"global_pooling: true", {2, 2, 2, 3, 3}}};
  uint64_t seed = 1;
  for (const GradientCase& c : cases) {
    SCOPED_TRACE(c.keys);
    Context ctx;
    LayerHarness h("{name: p, type: Pooling, pool: max, " + c.keys + "}", {c.x}, ctx);
    h.set_bottom(0, spaced_values(size_t(shape_numel(c.x)), seed++));
    check_gradients(h);
  }
}

TEST(PoolingNdLayer, SizesThatDoNotFitTheRankNameTheLayerAndKey) {
  expect_layer_error("{name: p, type: Pooling, kernel_size: [2, 2], stride: 2}", {{1, 2, 9}},
                     {"layer 'p' (Pooling): kernel_size: 2 entries for the 1 spatial axis of the "
                      "input [1, 2, 9]"});
  expect_layer_error("{name: p, type: Pooling, kernel_size: 2, stride: [2, 2]}", {{1, 2, 4, 4, 4}},
                     {"layer 'p'", "stride: 2 entries for the 3 spatial axes"});
  expect_layer_error("{name: p, type: Pooling, kernel_size: [2, 2, 2], pad: [0, 2, 0]}",
                     {{1, 2, 4, 4, 4}}, {"layer 'p'", "pad", "must be smaller than the kernel"});
  expect_layer_error("{name: p, type: Pooling, pool: average, output_size: 2}", {{1, 2, 4, 4, 4}},
                     {"layer 'p'", "output_size", "4-D input"});
  expect_layer_error("{name: p, type: Pooling, kernel_size: 2}", {{1, 8}},
                     {"layer 'p'", "3-D [N, C, L]"});
}

}  // namespace
}  // namespace crema::testing
