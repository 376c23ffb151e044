#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

TEST(ConvolutionLayer, ShapesAndParams) {
  Context ctx;
  LayerHarness h("{name: c, type: Convolution, num_output: 4, kernel_size: [3, 2], stride: 2, pad: 1}",
                 {{2, 3, 7, 6}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 4, 4, 4}));
  ASSERT_EQ(h.layer->params().size(), 2u);
  EXPECT_EQ(h.layer->params()[0].name, "c.weight");
  EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{4, 3, 3, 2}));
  EXPECT_EQ(h.layer->params()[1].value.shape(), (Shape{4}));
}

TEST(ConvolutionLayer, GradientStridePad) {
  Context ctx;
  LayerHarness h("{name: c, type: Convolution, num_output: 3, kernel_size: 3, stride: 2, pad: 1,"
                 " bias_filler: {type: uniform, min: -1, max: 1}}",
                 {{2, 2, 5, 6}}, ctx);
  h.set_bottom(0, random_values(2 * 2 * 5 * 6, -1, 1, 1));
  check_gradients(h);
}

TEST(ConvolutionLayer, GradientGroupsDilationNoBias) {
  Context ctx;
  LayerHarness h("{name: c, type: Convolution, num_output: 4, kernel_size: 2, dilation: 2,"
                 " group: 2, bias_term: false, weight_filler: {type: gaussian, std: 0.5}}",
                 {{1, 4, 5, 5}}, ctx);
  EXPECT_EQ(h.layer->params().size(), 1u);
  h.set_bottom(0, random_values(100, -1, 1, 2));
  check_gradients(h);
}

TEST(ConvolutionLayer, KernelLargerThanPaddedInputIsAnError) {
  Context ctx;
  try {
    LayerHarness h("{name: c, type: Convolution, num_output: 3, kernel_size: 5, pad: 0}", {{1, 1, 4, 4}}, ctx);
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

}  // namespace
}  // namespace crema::testing
