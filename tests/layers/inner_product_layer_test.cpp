#include <gtest/gtest.h>

#include <string>

#include "tests/support/error_text.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

TEST(InnerProductLayer, ForwardMatchesHandComputation) {
  Context ctx;
  LayerHarness h("{name: fc, type: InnerProduct, num_output: 2}", {{1, 3}}, ctx);
  h.set_bottom(0, {1, 2, 3});
  Param& w = h.layer->params()[0];
  const std::vector<float> weights = {1, 0, -1, 0.5, 0.5, 2};
  std::copy(weights.begin(), weights.end(), w.value.data<float>());
  h.layer->params()[1].value.data<float>()[0] = 10;
  h.layer->params()[1].value.data<float>()[1] = -1;
  h.forward();
  const auto y = h.top[0]->value.to_vector();
  EXPECT_FLOAT_EQ(y[0], 1 - 3 + 10);
  EXPECT_FLOAT_EQ(y[1], 0.5f + 1 + 6 - 1);
}

TEST(InnerProductLayer, GradientFlattensFromAxis) {
  Context ctx;
  LayerHarness h(
      "{name: fc, type: InnerProduct, num_output: 5,"
      " bias_filler: {type: uniform, min: -1, max: 1}}",
      {{3, 2, 2, 3}}, ctx, 1, Phase::train, DType::f64);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{3, 5}));
  EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{5, 12}));
  h.set_bottom(0, random_values(36, -1, 1, 3));
  check_gradients(h);
}

TEST(InnerProductLayer, GradientAxis2) {
  Context ctx;
  LayerHarness h("{name: fc, type: InnerProduct, num_output: 3, axis: 2}", {{2, 3, 4}}, ctx, 1,
                 Phase::train, DType::f64);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 3, 3}));
  h.set_bottom(0, random_values(24, -1, 1, 4));
  check_gradients(h);
}

// PyTorch's nn.Linear on a channels-last [N, H, W, C] tensor (ConvNeXt): axis -1, or 3.
TEST(InnerProductLayer, GradientLastAxisChannelsLast) {
  for (const char* axis : {"-1", "3"}) {
    SCOPED_TRACE(axis);
    Context ctx;
    LayerHarness h(std::string("{name: fc, type: InnerProduct, num_output: 4, axis: ") + axis +
                       ", bias_filler: {type: uniform, min: -1, max: 1}}",
                   {{2, 3, 5, 6}}, ctx, 1, Phase::train, DType::f64);
    EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 3, 5, 4}));
    EXPECT_EQ(h.layer->params()[0].value.shape(), (Shape{4, 6}));
    h.set_bottom(0, random_values(180, -1, 1, 6));
    check_gradients(h);
  }
  expect_layer_error("{name: fc, type: InnerProduct, num_output: 4, axis: -5}", {{2, 3, 5, 6}},
                     {"layer 'fc'", "axis -5"});
}

TEST(InnerProductLayer, GradientsAccumulate) {
  Context ctx;
  LayerHarness h("{name: fc, type: InnerProduct, num_output: 3}", {{2, 4}}, ctx);
  h.set_bottom(0, random_values(8, -1, 1, 5));
  h.forward();
  h.top[0]->grad.fill(1.0f);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const auto once = h.layer->params()[0].grad.to_vector();
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const auto twice = h.layer->params()[0].grad.to_vector();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
  EXPECT_EQ(h.layer->params()[1].grad.to_vector()[0], 4.0f);  // 2 rows x 2 passes
}

// Frozen parameters (lr_mult 0) get no gradient computation; the others and dx are unchanged.
TEST(InnerProductLayer, FrozenParametersGetNoGradient) {
  check_frozen_parameters("name: fc, type: InnerProduct, num_output: 3", {2, 4}, 6);
}

// f32 everywhere, f64 on the CPU, bf16 and f16 on CUDA (cuda::gemm_16bit); nchw only: an
// nhwc-stored 4-D input's trailing axes are not its features in memory order, and the layer says
// so when given one (a 1 x 1 map is the same bytes either way).
TEST(InnerProductLayer, RunsWhatItsKernelsRun) {
  Context ctx;
  LayerHarness h("{name: fc, type: InnerProduct, num_output: 3, axis: -1}", {{2, 4, 5, 6}}, ctx);
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  EXPECT_TRUE(h.layer->runs(DType::f32, Layout::nchw, cpu));
  EXPECT_TRUE(h.layer->runs(DType::f64, Layout::nchw, cpu));
  EXPECT_FALSE(h.layer->runs(DType::bf16, Layout::nchw, cpu));
  EXPECT_TRUE(h.layer->runs(DType::f32, Layout::nchw, gpu));
  EXPECT_TRUE(h.layer->runs(DType::bf16, Layout::nchw, gpu));
  EXPECT_TRUE(h.layer->runs(DType::f16, Layout::nchw, gpu));
  EXPECT_FALSE(h.layer->runs(DType::f64, Layout::nchw, gpu));
  for (DType dtype : {DType::f32, DType::bf16}) {
    EXPECT_FALSE(h.layer->runs(dtype, Layout::nhwc, gpu));
  }
  h.bottom[0]->value.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(error_of([&] { h.layer->reshape(h.bottom, h.top, ctx); }),
                  "layer 'fc' (InnerProduct): input f32[2, 4, 5, 6] nhwc on cpu is stored nhwc");
  LayerHarness one("{name: fc, type: InnerProduct, num_output: 3}", {{2, 4, 1, 1}}, ctx);
  one.bottom[0]->value.set_layout(Layout::nhwc);
  one.layer->reshape(one.bottom, one.top, ctx);
  EXPECT_EQ(one.top[0]->value.shape(), (Shape{2, 3}));
}

}  // namespace
}  // namespace crema::testing
