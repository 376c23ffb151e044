// Deconvolution layer: PyTorch's output size and weight layout, a hand-computed upsampling,
// numerical gradient checks for each option, frozen parameters, PyTorch's numbers, bad keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fixtures/conv_fixture.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

TEST(DeconvolutionLayer, OutputSizeAndWeightLayoutArePyTorchs) {
  Context ctx;
  // P = (H-1)*stride - 2*pad + dilation*(R-1) + 1 + output_padding = 3*2 - 2 + 2 + 1 + 1 = 8,
  // Q = 4*3 - 0 + 2*1 + 1 + 0 = 15.
  LayerHarness h(
      "{name: d, type: Deconvolution, num_output: 6, kernel_size: [3, 2],"
      " stride: [2, 3], pad: [1, 0], dilation: [1, 2], output_padding: [1, 0],"
      " group: 2}",
      {{2, 4, 4, 5}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 6, 8, 15}));
  ASSERT_EQ(h.layer->params().size(), 2u);
  EXPECT_EQ(h.layer->params()[0].name, "d.weight");
  EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{4, 3, 3, 2}));  // [C_in, C_out/G, R, S]
  EXPECT_EQ(h.layer->params()[1].value.shape(), (Shape{6}));
  // Each input element feeds K/G * R * S = 3 * 6 outputs.
  EXPECT_EQ(h.layer->multiply_adds(h.bottom, h.top), 2 * 4 * 4 * 5 * 18);
}

TEST(DeconvolutionLayer, StrideTwoUpsamplingByHand) {
  // One channel 2x2 -> 4x4 with a 2x2 filter and stride 2: every input pixel writes its own
  // 2x2 block, x[p,q] * w, plus the bias.
  Context ctx;
  LayerHarness h("{name: d, type: Deconvolution, num_output: 1, kernel_size: 2, stride: 2}",
                 {{1, 1, 2, 2}}, ctx);
  const std::vector<float> w = {1, 2, 3, 4};
  std::copy(w.begin(), w.end(), h.layer->params()[0].value.data<float>());
  h.layer->params()[1].value.data<float>()[0] = 0.5f;
  h.set_bottom(0, {1, -1, 2, 10});
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), (std::vector<float>{1.5, 2.5, -0.5, -1.5,  //
                                                             3.5, 4.5, -2.5, -3.5,  //
                                                             2.5, 4.5, 10.5, 20.5,  //
                                                             6.5, 8.5, 30.5, 40.5}));
}

// Each option on a random input, by central differences.
TEST(DeconvolutionLayer, GradientEveryOption) {
  check_gradient_cases(
      "name: d, type: Deconvolution",
      {{"num_output: 3, kernel_size: 3, stride: 2, pad: 1, output_padding: 1,"
        " bias_filler: {type: uniform, min: -1, max: 1}",
        {2, 2, 3, 4}},
       {"num_output: 4, kernel_h: 2, kernel_w: 3, stride_h: 1, stride_w: 2, pad: [1, 0],"
        " dilation: [2, 1], group: 2",
        {1, 4, 3, 3}},
       // group = C = K: a bilinear-style per-channel upsampling (FCN).
       {"num_output: 3, kernel_size: 4, stride: 2, pad: 1, group: 3, bias_term: false",
        {2, 3, 3, 2}},
       {"num_output: 5, kernel_size: 1, bias_filler: {type: uniform, min: -1, max: 1}",
        {2, 3, 2, 3}}});
}

TEST(DeconvolutionLayer, FrozenWeightGetsNoGradient) {
  Context ctx;
  LayerHarness h(
      "{name: d, type: Deconvolution, num_output: 2, kernel_size: 3, stride: 2,"
      " param: {weight: {lr_mult: 0}}}",
      {{1, 2, 3, 3}}, ctx);
  h.set_bottom(0, random_values(18, -1, 1, 5));
  h.forward();
  h.top[0]->grad.fill(1.0f);
  for (Param& p : h.layer->params()) p.grad.fill(7.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  for (float v : h.layer->params()[0].grad.to_vector()) ASSERT_EQ(v, 7.0f);
  // db += the sum of dy over each 7x7 output plane.
  EXPECT_EQ(h.layer->params()[1].grad.to_vector(), (std::vector<float>{7 + 49, 7 + 49}));
}

TEST(DeconvolutionLayer, GoldenStridePadMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "deconv_stride_pad",
                       "{name: d, type: Deconvolution, num_output: 4, kernel_size: 3, stride: 2,"
                       " pad: 1, output_padding: 1}");
}

TEST(DeconvolutionLayer, GoldenGroupedDilatedMatchesPyTorch) {
  Context ctx;
  check_against_golden(ctx, "deconv_grouped_dilated",
                       "{name: d, type: Deconvolution, num_output: 6, kernel_size: [3, 2],"
                       " stride: [2, 3], pad: [1, 0], dilation: [1, 2], group: 2}");
}

TEST(DeconvolutionLayer, BadKeysNameTheLayerAndTheKey) {
  auto expect_key_error = [](const std::string& keys, const Shape& x, const std::string& key) {
    expect_layer_error("{name: d, type: Deconvolution, " + keys + "}", {x}, {"layer 'd'", key});
  };
  const Shape x = {1, 4, 5, 5};
  expect_key_error("num_output: 4, kernel_size: 3, pad: -1", x, "pad");
  expect_key_error("num_output: 4, kernel_size: 3, stride: 0", x, "stride");
  expect_key_error("num_output: 4, kernel_size: -3", x, "kernel_size");
  expect_key_error("num_output: 4, kernel_size: 3, dilation: [1, 0]", x, "dilation");
  expect_key_error("num_output: 4, kernel_size: 3, group: 3", x, "group");
  expect_key_error("num_output: 6, kernel_size: 3, group: 4", x, "group");
  expect_key_error("num_output: 4, kernel_size: 3, stride: 2, output_padding: 2", x,
                   "output_padding");
  expect_key_error("num_output: 4, kernel_size: 3, output_padding: -1", x, "output_padding");
  // The output would have (5-1)*1 - 2*4 + 2 + 1 = -1 rows.
  expect_key_error("num_output: 4, kernel_size: 3, pad: 4", x, "pad");
}

}  // namespace
}  // namespace crema::testing
