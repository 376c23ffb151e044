// Convolution layer: shapes from every spelling of the keys, numerical gradient checks for each
// option (rectangular sizes, stride, padding, dilation, groups, depthwise, 1x1, no bias), frozen
// parameters, PyTorch's numbers, and the errors of bad keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fixtures/conv_fixture.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

TEST(ConvolutionLayer, ShapesAndParams) {
  Context ctx;
  LayerHarness h(
      "{name: c, type: Convolution, num_output: 4, kernel_size: [3, 2], stride: 2, pad: 1}",
      {{2, 3, 7, 6}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 4, 4, 4}));
  ASSERT_EQ(h.layer->params().size(), 2u);
  EXPECT_EQ(h.layer->params()[0].name, "c.weight");
  EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{4, 3, 3, 2}));
  EXPECT_EQ(h.layer->params()[1].value.shape(), (Shape{4}));
}

TEST(ConvolutionLayer, KernelLargerThanPaddedInputIsAnError) {
  expect_layer_error("{name: c, type: Convolution, num_output: 3, kernel_size: 5, pad: 0}",
                     {{1, 1, 4, 4}}, {"c"});
}

TEST(ConvolutionLayer, MissingKernelSizeIsAnError) {
  expect_layer_error("{name: c, type: Convolution, num_output: 3}", {{1, 1, 4, 4}},
                     {"kernel_size"});
}

// The issue-22 case: a misspelled required key is named as the unknown key it is.
TEST(ConvolutionLayer, MisspelledNumOutputIsNamed) {
  expect_layer_error("{name: c, type: Convolution, num_ouput: 3, kernel_size: 3}", {{1, 1, 4, 4}},
                     {"layer 'c' (Convolution): unknown key 'num_ouput' (did you mean "
                      "'num_output'? it is required)"});
  expect_layer_error("{name: c, type: Convolution, num_output: 3, kernel_sise: 3}",
                     {{1, 1, 4, 4}}, {"unknown key 'kernel_sise' (did you mean 'kernel_size'?"});
}

TEST(ConvolutionLayer, CaffeSeparateHeightAndWidthKeys) {
  Context ctx;
  LayerHarness h(
      "{name: c, type: Convolution, num_output: 2, kernel_h: 3, kernel_w: 1,"
      " stride_h: 2, stride_w: 1, pad_h: 0, pad_w: 2}",
      {{1, 3, 7, 5}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{1, 2, 3, 9}));
  EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{2, 3, 3, 1}));
}

// Each option on a random input, by central differences.
TEST(ConvolutionLayer, GradientEveryOption) {
  const std::string uniform_bias = "bias_filler: {type: uniform, min: -1, max: 1}";
  check_gradient_cases(
      "name: c, type: Convolution",
      {{"num_output: 3, kernel_size: 3, stride: 2, pad: 1, " + uniform_bias, {2, 2, 5, 6}},
       {"num_output: 4, kernel_size: 2, dilation: 2, group: 2, bias_term: false,"
        " weight_filler: {type: gaussian, std: 0.5}",
        {1, 4, 5, 5}},
       {"num_output: 3, kernel_size: [3, 2], stride: [2, 1], pad: [1, 2], " + uniform_bias,
        {2, 2, 6, 5}},
       {"num_output: 2, kernel_h: 2, kernel_w: 3, dilation: [2, 1], stride_h: 1, stride_w: 2,"
        " pad: 1",
        {1, 3, 6, 7}},
       // Depthwise: group = C = K, one 3x3 filter per channel.
       {"num_output: 3, kernel_size: 3, group: 3, stride: 2, pad: 1, " + uniform_bias,
        {2, 3, 5, 6}},
       // Depthwise multiplier: group = C, K = 2C, two filters per channel.
       {"num_output: 4, kernel_size: [2, 3], group: 2, dilation: 2, pad: [1, 2]", {1, 2, 5, 5}},
       // Pointwise: 1x1, stride 1, no padding, the plain-GEMM path, with groups.
       {"num_output: 4, kernel_size: 1, group: 2, " + uniform_bias, {3, 6, 3, 5}},
       {"num_output: 3, kernel_size: 1, stride: 2, bias_term: false", {2, 2, 5, 4}}});
}

TEST(ConvolutionLayer, NoBiasTermHasOnlyAWeight) {
  Context ctx;
  LayerHarness h(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 2, dilation: 2,"
      " group: 2, bias_term: false, weight_filler: {type: gaussian, std: 0.5}}",
      {{1, 4, 5, 5}}, ctx);
  EXPECT_EQ(h.layer->params().size(), 1u);
}

// Frozen parameters (lr_mult 0) get no gradient computation: their gradients stay as they were,
// while the other parameter and the input gradient are still right.
TEST(ConvolutionLayer, FrozenParametersGetNoGradient) {
  check_frozen_parameters("name: c, type: Convolution, num_output: 3, kernel_size: 3, pad: 1",
                          {2, 2, 5, 4}, 9);
}

TEST(ConvolutionLayer, GoldenGroupedMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "conv_grouped",
                       "{name: c, type: Convolution, num_output: 6, kernel_size: 3, pad: 1,"
                       " group: 2}");
}

TEST(ConvolutionLayer, GoldenDilatedMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "conv_dilated",
                       "{name: c, type: Convolution, num_output: 4, kernel_h: 3, kernel_w: 2,"
                       " stride: [2, 1], pad: [2, 1], dilation: [2, 3]}");
}

TEST(ConvolutionLayer, GoldenDepthwiseMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "conv_depthwise",
                       "{name: c, type: Convolution, num_output: 6, kernel_size: 3, stride: 2,"
                       " pad: 1, group: 3}");
}

TEST(ConvolutionLayer, BadKeysNameTheLayerAndTheKey) {
  auto expect_key_error = [](const std::string& yaml, const Shape& x, const std::string& key) {
    expect_layer_error(yaml, {x}, {"layer 'c'", key});
  };
  const Shape x = {1, 4, 8, 8};
  const std::string head = "{name: c, type: Convolution, num_output: 4, ";
  expect_key_error(head + "kernel_size: 3, pad: -1}", x, "pad");
  expect_key_error(head + "kernel_size: 3, pad_h: 1, pad_w: -2}", x, "pad_w");
  expect_key_error(head + "kernel_size: 3, stride: 0}", x, "stride");
  expect_key_error(head + "kernel_size: 3, stride: [1, -2]}", x, "stride");
  expect_key_error(head + "kernel_size: 3, stride_h: 0, stride_w: 1}", x, "stride_h");
  expect_key_error(head + "kernel_size: 0}", x, "kernel_size");
  expect_key_error(head + "kernel_size: [3, -1]}", x, "kernel_size");
  expect_key_error(head + "kernel_h: 3, kernel_w: 0}", x, "kernel_w");
  expect_key_error(head + "kernel_h: 3}", x, "kernel_w");
  expect_key_error(head + "kernel_size: 3, kernel_h: 3, kernel_w: 3}", x, "kernel_size");
  expect_key_error(head + "kernel_size: 3, dilation: 0}", x, "dilation");
  expect_key_error(head + "kernel_size: 3, group: 0}", x, "group");
  expect_key_error(head + "kernel_size: 3, group: 3}", x, "group");  // divides neither
  expect_key_error("{name: c, type: Convolution, num_output: 6, kernel_size: 3, group: 4}", x,
                   "group");  // divides C = 4 but not num_output = 6
  expect_key_error("{name: c, type: Convolution, num_output: 4, kernel_size: 3, group: 4}",
                   {1, 6, 8, 8}, "group");  // divides num_output but not C = 6
  expect_key_error("{name: c, type: Convolution, num_output: 0, kernel_size: 3}", x, "num_output");
}

}  // namespace
}  // namespace crema::testing
