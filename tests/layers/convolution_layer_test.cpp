// Convolution layer: shapes from every spelling of the keys, numerical gradient checks for each
// option (rectangular sizes, stride, padding, dilation, groups, depthwise, 1x1, no bias), frozen
// parameters, PyTorch's numbers, and the errors of bad keys.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fixtures/conv_fixture.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

// Runs `yaml` on a random [N,C,H,W] input and checks its gradients.
void check_conv_gradients(const std::string& yaml, const Shape& x, uint64_t seed) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness h(yaml, {x}, ctx);
  h.set_bottom(0, random_values(size_t(shape_numel(x)), -1, 1, seed));
  check_gradients(h);
}

// The message of the crema::Error that building `yaml` on an input of shape `x` throws.
std::string error_of(const std::string& yaml, const Shape& x) {
  Context ctx;
  try {
    LayerHarness h(yaml, {x}, ctx);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << yaml;
  return "";
}

// Building `yaml` fails with a message naming the layer and `key`.
void expect_key_error(const std::string& yaml, const Shape& x, const std::string& key) {
  const std::string message = error_of(yaml, x);
  EXPECT_NE(message.find("layer 'c'"), std::string::npos) << message;
  EXPECT_NE(message.find(key), std::string::npos) << "'" << key << "' not in: " << message;
}

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

TEST(ConvolutionLayer, GradientStridePad) {
  Context ctx;
  LayerHarness h(
      "{name: c, type: Convolution, num_output: 3, kernel_size: 3, stride: 2, pad: 1,"
      " bias_filler: {type: uniform, min: -1, max: 1}}",
      {{2, 2, 5, 6}}, ctx);
  h.set_bottom(0, random_values(2 * 2 * 5 * 6, -1, 1, 1));
  check_gradients(h);
}

TEST(ConvolutionLayer, GradientGroupsDilationNoBias) {
  Context ctx;
  LayerHarness h(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 2, dilation: 2,"
      " group: 2, bias_term: false, weight_filler: {type: gaussian, std: 0.5}}",
      {{1, 4, 5, 5}}, ctx);
  EXPECT_EQ(h.layer->params().size(), 1u);
  h.set_bottom(0, random_values(100, -1, 1, 2));
  check_gradients(h);
}

TEST(ConvolutionLayer, KernelLargerThanPaddedInputIsAnError) {
  Context ctx;
  try {
    LayerHarness h("{name: c, type: Convolution, num_output: 3, kernel_size: 5, pad: 0}",
                   {{1, 1, 4, 4}}, ctx);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c"), std::string::npos) << e.what();
  }
}

TEST(ConvolutionLayer, MissingKernelSizeIsAnError) {
  Context ctx;
  try {
    LayerHarness h("{name: c, type: Convolution, num_output: 3}", {{1, 1, 4, 4}}, ctx);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel_size"), std::string::npos) << e.what();
  }
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

TEST(ConvolutionLayer, GradientRectangularKernelStridePad) {
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 3, kernel_size: [3, 2],"
      " stride: [2, 1], pad: [1, 2], bias_filler: {type: uniform, min: -1, max: 1}}",
      {2, 2, 6, 5}, 3);
}

TEST(ConvolutionLayer, GradientDilationRectangular) {
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 2, kernel_h: 2, kernel_w: 3,"
      " dilation: [2, 1], stride_h: 1, stride_w: 2, pad: 1}",
      {1, 3, 6, 7}, 4);
}

TEST(ConvolutionLayer, GradientDepthwise) {
  // group = C = K: one 3x3 filter per channel.
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 3, kernel_size: 3, group: 3,"
      " stride: 2, pad: 1, bias_filler: {type: uniform, min: -1, max: 1}}",
      {2, 3, 5, 6}, 5);
}

TEST(ConvolutionLayer, GradientDepthwiseMultiplier) {
  // group = C, K = 2C: two filters per channel.
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 4, kernel_size: [2, 3],"
      " group: 2, dilation: 2, pad: [1, 2]}",
      {1, 2, 5, 5}, 6);
}

TEST(ConvolutionLayer, GradientPointwise) {
  // 1x1, stride 1, no padding: the plain-GEMM path, with groups.
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 4, kernel_size: 1, group: 2,"
      " bias_filler: {type: uniform, min: -1, max: 1}}",
      {3, 6, 3, 5}, 7);
}

TEST(ConvolutionLayer, GradientOneByOneStride2) {
  check_conv_gradients(
      "{name: c, type: Convolution, num_output: 3, kernel_size: 1, stride: 2,"
      " bias_term: false}",
      {2, 2, 5, 4}, 8);
}

// Frozen parameters (lr_mult 0) get no gradient computation: their gradients stay as they were,
// while the other parameter and the input gradient are still right.
TEST(ConvolutionLayer, FrozenParametersGetNoGradient) {
  for (const std::string frozen : {"weight", "bias"}) {
    SCOPED_TRACE(frozen);
    Context ctx;
    LayerHarness h(
        "{name: c, type: Convolution, num_output: 3, kernel_size: 3, pad: 1,"
        " param: {" +
            frozen + ": {lr_mult: 0}}}",
        {{2, 2, 5, 4}}, ctx);
    h.set_bottom(0, random_values(80, -1, 1, 9));
    LayerHarness reference("{name: c, type: Convolution, num_output: 3, kernel_size: 3, pad: 1}",
                           {{2, 2, 5, 4}}, ctx);
    reference.set_bottom(0, random_values(80, -1, 1, 9));
    for (size_t i = 0; i < 2; ++i) {
      reference.layer->params()[i].value.copy_from(h.layer->params()[i].value);
    }
    for (LayerHarness* run : {&h, &reference}) {
      run->forward();
      const Shape& y = run->top[0]->value.shape();
      run->top[0]->grad.copy_from(
          Tensor::from_vector(y, random_values(size_t(shape_numel(y)), -1, 1, 10)));
      for (Param& p : run->layer->params()) p.grad.fill(7.0f);
      run->layer->backward(run->top, {true}, run->bottom, ctx);
    }
    const size_t frozen_index = frozen == "weight" ? 0 : 1;
    for (size_t i = 0; i < 2; ++i) {
      const std::vector<float> got = h.layer->params()[i].grad.to_vector();
      if (i == frozen_index) {
        for (float v : got) ASSERT_EQ(v, 7.0f) << "a frozen gradient was written";
      } else {
        EXPECT_EQ(got, reference.layer->params()[i].grad.to_vector());
      }
    }
    EXPECT_EQ(h.bottom[0]->grad.to_vector(), reference.bottom[0]->grad.to_vector());
  }
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
