// The structure layers on the CPU: Concat, Slice, Eltwise, Flatten, Reshape, Split, Scale, Bias
// and Permute. For each: numerical gradient checks of every option, hand-checked shapes or
// values, and the config errors (which must name the layer and the key).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// Random values in every bottom, then the numerical gradient check.
void check_layer(const std::string& yaml, const std::vector<Shape>& shapes, int num_tops = 1,
                 const GradientCheckOptions& options = {}) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness h(yaml, shapes, ctx, num_tops, Phase::train, DType::f64);
  for (size_t b = 0; b < shapes.size(); ++b) {
    h.set_bottom(b, random_values(size_t(shape_numel(shapes[b])), -1, 1, 10 + b));
  }
  check_gradients(h, options);
}

// ---- Concat ----

TEST(ConcatLayer, GradientAlongChannels) {
  check_layer("{name: c, type: Concat}", {{2, 2, 3, 2}, {2, 1, 3, 2}, {2, 3, 3, 2}});
}

TEST(ConcatLayer, GradientAlongOtherAxes) {
  check_layer("{name: c, type: Concat, axis: 0}", {{1, 3, 2}, {2, 3, 2}});
  check_layer("{name: c, type: Concat, axis: -1}", {{2, 3, 1}, {2, 3, 4}});
  check_layer("{name: c, type: Concat}", {{3, 5}});  // one bottom: a copy
}

TEST(ConcatLayer, ValuesAndShape) {
  Context ctx;
  LayerHarness h("{name: c, type: Concat, axis: 1}", {{2, 1}, {2, 2}}, ctx);
  h.set_bottom(0, {1, 2});
  h.set_bottom(1, {10, 11, 20, 21});
  h.forward();
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 3}));
  EXPECT_EQ(h.top[0]->value.to_vector(), (std::vector<float>{1, 10, 11, 2, 20, 21}));
}

TEST(ConcatLayer, MismatchedShapesAreConfigErrors) {
  expect_layer_error(
      "{name: cat, type: Concat}", {{2, 3, 4}, {2, 3, 5}},
      {"layer 'cat' (Concat)", "bottom", "'bottom0' [2, 3, 4]", "'bottom1' [2, 3, 5]"});
  expect_layer_error("{name: cat, type: Concat}", {{2, 3, 4}, {2, 3}}, {"layer 'cat'", "[2, 3]"});
  expect_layer_error("{name: cat, type: Concat, axis: 3}", {{2, 3, 4}}, {"layer 'cat'", "axis: 3"});
}

// ---- Slice ----

TEST(SliceLayer, GradientWithSlicePoints) {
  check_layer("{name: s, type: Slice, axis: 1, slice_point: [1, 3]}", {{2, 5, 3}}, 3);
}

TEST(SliceLayer, GradientEqualPieces) {
  check_layer("{name: s, type: Slice, axis: -1}", {{2, 3, 4}}, 2);
  check_layer("{name: s, type: Slice, axis: 0}", {{3, 2}}, 3);
}

TEST(SliceLayer, Shapes) {
  Context ctx;
  LayerHarness h("{name: s, type: Slice, slice_point: [2, 3]}", {{4, 6, 5}}, ctx, 3);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{4, 2, 5}));
  EXPECT_EQ(h.top[1]->value.shape(), (Shape{4, 1, 5}));
  EXPECT_EQ(h.top[2]->value.shape(), (Shape{4, 3, 5}));
}

TEST(SliceLayer, BadSlicePointsAreConfigErrors) {
  expect_layer_error("{name: sl, type: Slice, slice_point: [1, 2]}", {{2, 5}},
                     {"layer 'sl' (Slice)", "slice_point", "2 slice points", "2 tops"}, 2);
  expect_layer_error("{name: sl, type: Slice, slice_point: [3, 2]}", {{2, 5}},
                     {"layer 'sl'", "slice_point", "increase"}, 3);
  expect_layer_error("{name: sl, type: Slice, slice_point: [5]}", {{2, 5}},
                     {"layer 'sl'", "slice_point"}, 2);
  expect_layer_error("{name: sl, type: Slice}", {{2, 5}},
                     {"layer 'sl'", "slice_point", "equal pieces"}, 2);
}

// ---- Eltwise ----

// Three bottoms whose elements differ by at least 0.1 (more than the check's step), each winning
// the max somewhere.
std::vector<std::vector<float>> separated_bottoms(size_t count) {
  const std::vector<float> base = random_values(count, -1, 1, 3);
  std::vector<std::vector<float>> b(3, base);
  for (size_t j = 0; j < 3; ++j) {
    for (size_t e = 0; e < count; ++e) b[j][e] += 0.15f * float((e + j) % 3);
  }
  return b;
}

TEST(EltwiseLayer, GradientSum) {
  check_layer("{name: e, type: Eltwise}", {{2, 3, 4}, {2, 3, 4}});
}

TEST(EltwiseLayer, GradientSumWithCoefficients) {
  check_layer("{name: e, type: Eltwise, operation: SUM, coeff: [1, -1, 0.5]}",
              {{3, 5}, {3, 5}, {3, 5}});
}

TEST(EltwiseLayer, GradientProd) {
  check_layer("{name: e, type: Eltwise, operation: PROD}", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}});
}

TEST(EltwiseLayer, GradientMax) {
  Context ctx;
  LayerHarness h("{name: e, type: Eltwise, operation: MAX}", {{2, 3, 5}, {2, 3, 5}, {2, 3, 5}}, ctx,
                 1, Phase::train, DType::f64);
  const auto values = separated_bottoms(30);
  for (size_t j = 0; j < 3; ++j) h.set_bottom(j, values[j]);
  check_gradients(h);
}

TEST(EltwiseLayer, MaxRoutesTiesToTheFirstBottom) {
  Context ctx;
  LayerHarness h("{name: e, type: Eltwise, operation: MAX}", {{4}, {4}}, ctx);
  h.set_bottom(0, {1, 5, 2, -1});
  h.set_bottom(1, {1, 3, 7, -1});
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(), (std::vector<float>{1, 5, 7, -1}));
  h.top[0]->grad.copy_from(Tensor::from_vector({4}, {10, 20, 30, 40}));
  h.layer->backward(h.top, {true, true}, h.bottom, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), (std::vector<float>{10, 20, 0, 40}));
  EXPECT_EQ(h.bottom[1]->grad.to_vector(), (std::vector<float>{0, 0, 30, 0}));
}

TEST(EltwiseLayer, BadInputsAreConfigErrors) {
  expect_layer_error("{name: el, type: Eltwise}", {{2, 3}, {3, 2}},
                     {"layer 'el' (Eltwise)", "bottom", "[2, 3]", "[3, 2]"});
  expect_layer_error("{name: el, type: Eltwise, coeff: [1, 2, 3]}", {{2, 3}, {2, 3}},
                     {"layer 'el' (Eltwise)", "coeff", "3 coefficients for 2 bottoms"});
  expect_layer_error("{name: el, type: Eltwise, operation: MAX, coeff: [1, 2]}", {{2}, {2}},
                     {"layer 'el'", "coeff", "SUM"});
  expect_layer_error("{name: el, type: Eltwise, operation: MIN}", {{2}, {2}},
                     {"layer 'el'", "operation", "MIN"});
  expect_layer_error("{name: el, type: Eltwise, operation: PROD, stable_prod_grad: false}",
                     {{2}, {2}}, {"layer 'el'", "stable_prod_grad"});
}

// ---- Flatten and Reshape ----

TEST(FlattenLayer, Gradient) {
  check_layer("{name: f, type: Flatten}", {{2, 3, 2, 2}});
}

TEST(FlattenLayer, GradientAxisRange) {
  check_layer("{name: f, type: Flatten, axis: 1, end_axis: 2}", {{2, 3, 2, 2}});
}

TEST(FlattenLayer, ShapesAndSharing) {
  Context ctx;
  LayerHarness h("{name: f, type: Flatten}", {{2, 3, 4, 5}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 60}));
  EXPECT_TRUE(h.top[0]->value.shares_storage(h.bottom[0]->value));
  h.top[0]->grad.fill(1.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  EXPECT_TRUE(h.bottom[0]->grad.shares_storage(h.top[0]->grad));
  EXPECT_EQ(h.bottom[0]->grad.shape(), (Shape{2, 3, 4, 5}));
  LayerHarness g("{name: f, type: Flatten, axis: 0, end_axis: -2}", {{2, 3, 4, 5}}, ctx);
  EXPECT_EQ(g.top[0]->value.shape(), (Shape{24, 5}));
  expect_layer_error("{name: fl, type: Flatten, axis: 2, end_axis: 1}", {{2, 3, 4}},
                     {"layer 'fl' (Flatten)", "end_axis"});
  expect_layer_error("{name: fl, type: Flatten, axis: 4}", {{2, 3, 4}}, {"layer 'fl'", "axis: 4"});
}

TEST(ReshapeLayer, Gradient) {
  check_layer("{name: r, type: Reshape, shape: [0, -1]}", {{2, 3, 2}});
}

TEST(ReshapeLayer, GradientAxisAndNumAxes) {
  check_layer("{name: r, type: Reshape, shape: [2, 2], axis: 1, num_axes: 1}", {{3, 4, 2}});
}

Shape reshaped(const std::string& keys, const Shape& bottom) {
  Context ctx;
  LayerHarness h("{name: r, type: Reshape, " + keys + "}", {bottom}, ctx);
  return h.top[0]->value.shape();
}

TEST(ReshapeLayer, CaffeShapeRules) {
  EXPECT_EQ(reshaped("shape: [0, -1]", {2, 3, 4}), (Shape{2, 12}));
  EXPECT_EQ(reshaped("shape: [-1, 0]", {2, 3, 4}), (Shape{8, 3}));
  EXPECT_EQ(reshaped("shape: {dim: [0, 0, 2, -1]}", {2, 3, 4}), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(reshaped("shape: [-1], axis: 1", {2, 3, 4}), (Shape{2, 12}));
  EXPECT_EQ(reshaped("shape: [1, 1], axis: -1", {2, 3}), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(reshaped("shape: [6], axis: 0, num_axes: 2", {2, 3, 4}), (Shape{6, 4}));
  EXPECT_EQ(reshaped("shape: [], axis: 1, num_axes: 1", {5, 1, 7}), (Shape{5, 7}));
}

TEST(ReshapeLayer, BadShapesAreConfigErrors) {
  expect_layer_error("{name: re, type: Reshape, shape: [0, 5, -1]}", {{2, 3, 4}},
                     {"layer 're' (Reshape)", "shape", "divide"});
  expect_layer_error("{name: re, type: Reshape, shape: [5, 5]}", {{2, 3, 4}},
                     {"layer 're'", "shape", "24 elements"});
  expect_layer_error("{name: re, type: Reshape, shape: [-1, -1]}", {{2, 3}},
                     {"layer 're'", "shape", "at most one"});
  expect_layer_error("{name: re, type: Reshape, shape: [0, 0, 0]}", {{6, 4}},
                     {"layer 're'", "shape", "does not have"});
  expect_layer_error("{name: re, type: Reshape, shape: [2], axis: 1, num_axes: 3}", {{2, 3}},
                     {"layer 're'", "num_axes"});
  expect_layer_error("{name: re, type: Reshape}", {{2, 3}}, {"layer 're'", "shape", "required"});
  expect_layer_error("{name: re, type: Reshape, shap: [0, -1]}", {{2, 3}},
                     {"layer 're' (Reshape): unknown key 'shap' (did you mean 'shape'? it is "
                      "required)"});
}

TEST(ReshapeLayer, DoesNotRunInPlace) {
  Context ctx;
  LayerHarness h("{name: r, type: Reshape, shape: [-1]}", {{2, 3}}, ctx);
  std::vector<Blob*> same = {h.bottom[0]};
  EXPECT_THROW(h.layer->reshape(same, same, ctx), Error);
}

// In a net, the view layers pass values forward and gradients back as if absent: the same loss
// and parameter gradients as the net without them.
TEST(ReshapeLayer, ViewsInANetChangeNothing) {
  const std::string head = R"(
inputs: {data: [3, 4], label: []}
layers:
  - {name: ip1, type: InnerProduct, bottom: data, top: ip1, num_output: 12,
     weight_filler: {type: gaussian, std: 0.5}, bias_filler: {type: gaussian, std: 0.5}}
)";
  const std::string tail = R"(
  - {name: ip2, type: InnerProduct, bottom: h, top: ip2, num_output: 5,
     weight_filler: {type: gaussian, std: 0.5}}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}
)";
  const std::string with_views = head + R"(
  - {name: r, type: Reshape, bottom: ip1, top: r, shape: [0, 3, -1]}
  - {name: f, type: Flatten, bottom: r, top: h}
)" + tail;
  const std::string without = head + R"(
  - {name: f, type: ReLU, bottom: ip1, top: h, negative_slope: 1}
)" + tail;
  auto run = [](const std::string& yaml) {
    Context ctx(Device::cpu(), 5);
    const ConfigNode model = parse_config(yaml, "net.yaml");
    Net net(model, Phase::train, 2, builtin_layers(), ctx);
    net.blob("data").value.copy_from(Tensor::from_vector({2, 3, 4}, random_values(24, -1, 1, 9)));
    net.blob("label").value.copy_from(Tensor::from_vector({2}, {1, 4}));
    net.forward(ctx);
    net.backward(ctx);
    std::vector<float> out = {float(net.loss())};
    for (const Param* p : net.learnable_params()) {
      const std::vector<float> g = p->grad.to_vector();
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  };
  const std::vector<float> a = run(with_views), b = run(without);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;
}

// ---- Split ----

TEST(SplitLayer, Gradient) {
  check_layer("{name: s, type: Split}", {{2, 3, 2}}, 3);
  check_layer("{name: s, type: Split}", {{5}}, 2);
}

// ---- Scale and Bias ----

const char* kUniform = "{type: uniform, min: -1.5, max: 1.5}";

TEST(ScaleLayer, GradientLearned) {
  check_layer(std::string("{name: s, type: Scale, filler: ") + kUniform + "}", {{2, 3, 2, 3}});
}

TEST(ScaleLayer, GradientWithBiasTerm) {
  check_layer(std::string("{name: s, type: Scale, bias_term: true, filler: ") + kUniform +
                  ", bias_filler: " + kUniform + "}",
              {{2, 3, 2, 3}});
}

TEST(ScaleLayer, GradientLearnedOverSeveralAxes) {
  check_layer(std::string("{name: s, type: Scale, num_axes: 2, filler: ") + kUniform + "}",
              {{2, 3, 2, 3}});
  check_layer(
      std::string("{name: s, type: Scale, axis: 2, num_axes: -1, filler: ") + kUniform + "}",
      {{2, 3, 2, 3}});
  check_layer(std::string("{name: s, type: Scale, num_axes: 0, filler: ") + kUniform + "}",
              {{2, 3, 4}});
}

TEST(ScaleLayer, GradientSecondBottom) {
  check_layer("{name: s, type: Scale}", {{2, 3, 2, 3}, {3}});
  check_layer("{name: s, type: Scale, axis: 0}", {{2, 3, 2, 3}, {2, 3}});
  check_layer("{name: s, type: Scale}", {{2, 3, 4}, {}});  // a scalar scales everything
  check_layer(std::string("{name: s, type: Scale, bias_term: true, bias_filler: ") + kUniform + "}",
              {{2, 3, 2, 3}, {3}});
}

TEST(ScaleLayer, FrozenParametersGetNoGradient) {
  Context ctx;
  LayerHarness h(std::string("{name: s, type: Scale, bias_term: true, filler: ") + kUniform +
                     ", param: {weight: {lr_mult: 0}}}",
                 {{2, 3, 4}}, ctx);
  h.set_bottom(0, random_values(24, -1, 1, 1));
  h.forward();
  h.top[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, random_values(24, -1, 1, 2)));
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  EXPECT_EQ(h.layer->params()[0].name, "s.weight");
  EXPECT_EQ(h.layer->params()[0].grad.to_vector(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(h.layer->params()[1].name, "s.bias");
  EXPECT_NE(h.layer->params()[1].grad.to_vector(), (std::vector<float>{0, 0, 0}));
}

// In place (top == bottom), the layer keeps x for the scale's gradient and reads dL/dy before
// overwriting it with dL/dx: the same results as out of place.
TEST(ScaleLayer, InPlaceMatchesOutOfPlace) {
  Context ctx;
  const std::string yaml = std::string("{name: s, type: Scale, bias_term: true, filler: ") +
                           kUniform + ", bias_filler: " + kUniform + "}";
  LayerHarness h(yaml, {{2, 3, 4}}, ctx);
  const std::vector<float> x = random_values(24, -1, 1, 1), dy = random_values(24, -1, 1, 2);
  h.set_bottom(0, x);
  h.forward();
  h.top[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, dy));
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const std::vector<float> y = h.top[0]->value.to_vector(), dx = h.bottom[0]->grad.to_vector();
  const std::vector<float> dscale = h.layer->params()[0].grad.to_vector();
  const std::vector<float> dbias = h.layer->params()[1].grad.to_vector();

  std::vector<Blob*> same = {h.bottom[0]};
  h.layer->reshape(same, same, ctx);
  h.set_bottom(0, x);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), y);
  h.bottom[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, dy));
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), dx);
  EXPECT_EQ(h.layer->params()[0].grad.to_vector(), dscale);
  EXPECT_EQ(h.layer->params()[1].grad.to_vector(), dbias);
}

// Squeeze-excitation's last step, x[n, c, h, w] * s[n, c] (torchvision's SqueezeExcitation:
// `scale * input` with scale [N, C, 1, 1]): Scale with the gate as a second bottom [N, C] and
// axis 0, the gate flattened from [N, C, 1, 1] by a Flatten (a view). Values by hand, then the
// gradient to both bottoms on an awkward shape.
TEST(ScaleLayer, GradientSqueezeExcitationGate) {
  Context ctx;
  LayerHarness h("{name: se, type: Scale, axis: 0}", {{2, 3, 1, 2}, {2, 3}}, ctx);
  h.set_bottom(0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  h.set_bottom(1, {0.5f, 2, -1, 0, 1, 0.25f});
  h.forward();
  EXPECT_EQ(h.top[0]->value.to_vector(),
            (std::vector<float>{0.5f, 1, 6, 8, -5, -6, 0, 0, 9, 10, 2.75f, 3}));
  h.top[0]->grad.fill(1.0f);
  h.layer->backward(h.top, {true, true}, h.bottom, ctx);
  EXPECT_EQ(h.bottom[1]->grad.to_vector(), (std::vector<float>{3, 7, 11, 15, 19, 23}));
  check_layer("{name: se, type: Scale, axis: 0}", {{3, 5, 7, 3}, {3, 5}});
  check_layer("{name: se, type: Scale, axis: 0}", {{1, 13, 3, 3}, {1, 13}});
}

// ---- LayerScale ----

TEST(LayerScaleLayer, GradientNCHW) {
  check_layer(std::string("{name: ls, type: LayerScale, filler: ") + kUniform + "}",
              {{2, 5, 3, 4}});
  check_layer(std::string("{name: ls, type: LayerScale, filler: ") + kUniform + "}", {{3, 7}});
}

// torchvision's ConvNeXt CNBlock: `layer_scale` [C, 1, 1], 1e-6 at init, named after the block.
TEST(LayerScaleLayer, TorchvisionNameShapeAndInit) {
  Context ctx;
  LayerHarness h("{name: features.1.0, type: LayerScale}", {{2, 96, 5, 5}}, ctx);
  ASSERT_EQ(h.layer->params().size(), 1u);
  const Param& p = h.layer->params()[0];
  EXPECT_EQ(p.name, "features.1.0.layer_scale");
  EXPECT_EQ(p.value.shape(), (Shape{96, 1, 1}));
  EXPECT_EQ(p.value.to_vector(), std::vector<float>(96, 1e-6f));
  LayerHarness g("{name: ls, type: LayerScale, filler: {type: constant, value: 2}}", {{1, 2, 1, 2}},
                 ctx);
  g.set_bottom(0, {1, 2, 3, 4});
  g.forward();
  EXPECT_EQ(g.top[0]->value.to_vector(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(LayerScaleLayer, InPlaceAndFrozen) {
  Context ctx;
  const std::string yaml = std::string("{name: ls, type: LayerScale, filler: ") + kUniform + "}";
  LayerHarness h(yaml, {{2, 3, 4}}, ctx);
  const std::vector<float> x = random_values(24, -1, 1, 1), dy = random_values(24, -1, 1, 2);
  h.set_bottom(0, x);
  h.forward();
  h.top[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, dy));
  h.layer->params()[0].grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const std::vector<float> y = h.top[0]->value.to_vector(), dx = h.bottom[0]->grad.to_vector();
  const std::vector<float> dgamma = h.layer->params()[0].grad.to_vector();
  std::vector<Blob*> same = {h.bottom[0]};
  h.layer->reshape(same, same, ctx);
  h.set_bottom(0, x);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), y);
  h.bottom[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, dy));
  h.layer->params()[0].grad.fill(0.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), dx);
  EXPECT_EQ(h.layer->params()[0].grad.to_vector(), dgamma);

  LayerHarness frozen("{name: ls, type: LayerScale, param: {layer_scale: {lr_mult: 0}}}",
                      {{2, 3, 4}}, ctx);
  frozen.set_bottom(0, x);
  frozen.forward();
  frozen.top[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, dy));
  frozen.layer->params()[0].grad.fill(0.0f);
  frozen.layer->backward(frozen.top, {true}, frozen.bottom, ctx);
  EXPECT_EQ(frozen.layer->params()[0].grad.to_vector(), std::vector<float>(3, 0.0f));
}

TEST(LayerScaleLayer, Errors) {
  expect_layer_error("{name: ls, type: LayerScale}", {{5}}, {"layer 'ls'", "[N, C, ...]"});
}

TEST(ScaleLayer, BadInputsAreConfigErrors) {
  expect_layer_error("{name: sc, type: Scale}", {{2, 3, 4}, {4}},
                     {"layer 'sc' (Scale)", "axis", "[4]", "[2, 3, 4]"});
  expect_layer_error("{name: sc, type: Scale, axis: 1, num_axes: 3}", {{2, 3, 4}},
                     {"layer 'sc'", "num_axes"});
  expect_layer_error("{name: sc, type: Scale, num_axes: -2}", {{2, 3, 4}},
                     {"layer 'sc'", "num_axes"});
}

TEST(BiasLayer, GradientLearned) {
  check_layer(std::string("{name: b, type: Bias, filler: ") + kUniform + "}", {{2, 3, 2, 3}});
  check_layer(std::string("{name: b, type: Bias, axis: -1, filler: ") + kUniform + "}",
              {{2, 3, 4}});
}

TEST(BiasLayer, GradientSecondBottom) {
  check_layer("{name: b, type: Bias}", {{2, 3, 2, 3}, {3}});
  check_layer("{name: b, type: Bias, axis: 0}", {{2, 3, 4}, {2, 3}});
}

TEST(BiasLayer, ParameterNameAndInPlace) {
  Context ctx;
  LayerHarness h(std::string("{name: b, type: Bias, filler: ") + kUniform + "}", {{2, 3}}, ctx);
  ASSERT_EQ(h.layer->params().size(), 1u);
  EXPECT_EQ(h.layer->params()[0].name, "b.bias");
  const std::vector<float> x = random_values(6, -1, 1, 3);
  h.set_bottom(0, x);
  h.forward();
  const std::vector<float> y = h.top[0]->value.to_vector();
  std::vector<Blob*> same = {h.bottom[0]};
  h.layer->reshape(same, same, ctx);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), y);
  h.bottom[0]->grad.copy_from(Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6}));
  h.layer->params()[0].grad.fill(0.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(h.layer->params()[0].grad.to_vector(), (std::vector<float>{5, 7, 9}));
}

// ---- Permute ----

TEST(PermuteLayer, GradientNchwToNhwc) {
  check_layer("{name: p, type: Permute, order: [0, 2, 3, 1]}", {{2, 3, 2, 4}});
}

TEST(PermuteLayer, GradientGeneralOrder) {
  check_layer("{name: p, type: Permute, order: [2, 0, 3, 1]}", {{2, 3, 2, 4}});
  check_layer("{name: p, type: Permute, order: [0, 2]}", {{2, 3, 2, 2}});
}

TEST(PermuteLayer, ShapesAndValues) {
  Context ctx;
  LayerHarness h("{name: p, type: Permute, order: [0, 2]}", {{2, 3, 4, 5}}, ctx);
  EXPECT_EQ(h.top[0]->value.shape(), (Shape{2, 4, 3, 5}));
  LayerHarness g("{name: p, type: Permute, order: [1, 0]}", {{2, 3}}, ctx);
  g.set_bottom(0, {1, 2, 3, 4, 5, 6});
  g.forward();
  EXPECT_EQ(g.top[0]->value.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  LayerHarness i("{name: p, type: Permute}", {{2, 3}}, ctx);
  EXPECT_EQ(i.top[0]->value.shape(), (Shape{2, 3}));
}

TEST(PermuteLayer, BadOrderIsAConfigError) {
  expect_layer_error("{name: pe, type: Permute, order: [0, 2, 2, 1]}", {{2, 3, 4, 5}},
                     {"layer 'pe' (Permute)", "order", "appears twice"});
  expect_layer_error("{name: pe, type: Permute, order: [0, 4]}", {{2, 3, 4, 5}},
                     {"layer 'pe'", "order", "4 is not an axis"});
}

}  // namespace
}  // namespace crema::testing
