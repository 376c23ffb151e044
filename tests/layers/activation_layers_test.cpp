// The activation layers (PReLU, ELU, Sigmoid, TanH, Clip, Swish/SiLU, GELU, Hardsigmoid,
// Hardswish, Mish) on the CPU: the
// numerical gradient check for every type and option, in-place runs against out-of-place ones,
// PReLU's parameter (name, shape, filler, frozen, accumulation) and the configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

// Uniform values in [-range, range) kept at least `gap` away from each kink (a central difference
// across a kink measures neither side's derivative).
std::vector<float> values_away_from(size_t count, const std::vector<float>& kinks, uint64_t seed,
                                    float gap = 0.03f, float range = 2.0f) {
  std::vector<float> v = random_values(count, -range, range, seed);
  for (float& x : v) {
    for (float k : kinks) {
      if (std::fabs(x - k) < gap) x = k + (x < k ? -gap : gap);
    }
  }
  return v;
}

void check_away_from_kinks(const std::string& yaml, const Shape& shape,
                           const std::vector<float>& kinks = {}, float range = 2.0f) {
  check_layer_gradients(yaml, shape,
                        values_away_from(size_t(shape_numel(shape)), kinks, 11, 0.03f, range));
}

// Runs the layer out of place, then in place (top and bottom one blob) on the same input and
// top gradient: outputs, input gradients and parameter gradients must be the same bits.
void expect_in_place_matches(const std::string& yaml, const Shape& shape) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness h(yaml, {shape}, ctx);
  const size_t n = size_t(shape_numel(shape));
  const std::vector<float> x = random_values(n, -3.0f, 3.0f, 21);
  const Tensor dy = Tensor::from_vector(shape, random_values(n, -1.0f, 1.0f, 22));
  auto param_grads = [&] {
    std::vector<std::vector<float>> grads;
    for (Param& p : h.layer->params()) grads.push_back(p.grad.to_vector());
    return grads;
  };
  h.set_bottom(0, x);
  h.forward();
  const std::vector<float> y = h.top[0]->value.to_vector();
  h.top[0]->grad.copy_from(dy);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const std::vector<float> dx = h.bottom[0]->grad.to_vector();
  const auto grads = param_grads();

  std::vector<Blob*> same = {h.bottom[0]};
  h.set_bottom(0, x);
  h.layer->reshape(same, same, ctx);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), y);
  h.bottom[0]->grad.copy_from(dy);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), dx);
  EXPECT_EQ(param_grads(), grads);
}

// --- gradient checks, one suite per registered type -----------------------------------------

TEST(PReLULayer, GradientPerChannel) {
  check_away_from_kinks("{name: p, type: PReLU, filler: {type: uniform, min: -0.3, max: 0.6}}",
                        {2, 3, 2, 3}, {0});
}

TEST(PReLULayer, GradientShared) {
  check_away_from_kinks("{name: p, type: PReLU, channel_shared: true}", {3, 2, 5}, {0});
}

TEST(PReLULayer, GradientChannelsLast2D) {  // [N, C] as after InnerProduct: D = 1
  check_away_from_kinks("{name: p, type: PReLU, filler: {type: uniform, min: 0.1, max: 0.4}}",
                        {4, 5}, {0});
}

TEST(ELULayer, Gradient) {
  check_away_from_kinks("{name: e, type: ELU}", {2, 3, 4}, {0});
}

TEST(ELULayer, GradientAlpha) {
  check_away_from_kinks("{name: e, type: ELU, alpha: 0.4}", {5, 7}, {0});
}

TEST(SigmoidLayer, Gradient) {
  check_away_from_kinks("{name: s, type: Sigmoid}", {2, 3, 4});
}

TEST(TanHLayer, Gradient) {
  check_away_from_kinks("{name: t, type: TanH}", {2, 3, 4});
}

TEST(ClipLayer, Gradient) {
  check_away_from_kinks("{name: c, type: Clip, min: -0.5, max: 0.8}", {3, 11}, {-0.5f, 0.8f});
}

TEST(ClipLayer, GradientReLU6) {
  check_away_from_kinks("{name: c, type: Clip, min: 0, max: 6}", {4, 9}, {0.0f});
}

TEST(SwishLayer, Gradient) {
  check_away_from_kinks("{name: s, type: Swish}", {2, 3, 4});
}

TEST(SwishLayer, GradientBeta) {
  check_away_from_kinks("{name: s, type: Swish, beta: 1.7}", {2, 13});
}

TEST(SiLULayer, Gradient) {
  check_away_from_kinks("{name: s, type: SiLU}", {2, 3, 4});
}

TEST(GELULayer, Gradient) {
  check_away_from_kinks("{name: g, type: GELU}", {2, 3, 4});
}

TEST(GELULayer, GradientTanhApproximation) {
  check_away_from_kinks("{name: g, type: GELU, approximate: tanh}", {2, 3, 4});
}

// Inputs in [-5, 5): all three pieces, away from the kinks at -3 and 3.
TEST(HardsigmoidLayer, Gradient) {
  check_away_from_kinks("{name: h, type: Hardsigmoid}", {3, 5, 7}, {-3.0f, 3.0f}, 5.0f);
}

TEST(HardswishLayer, Gradient) {
  check_away_from_kinks("{name: h, type: Hardswish}", {3, 5, 7}, {-3.0f, 3.0f}, 5.0f);
}

// Inputs in [-5, 5): Mish's minimum near -1.19 and both tails.
TEST(MishLayer, Gradient) {
  check_away_from_kinks("{name: m, type: Mish}", {3, 5, 7}, {}, 5.0f);
}

// Inputs in [-5, 5), off 0, where the second derivative jumps (|x|).
TEST(SoftsignLayer, Gradient) {
  check_away_from_kinks("{name: s, type: Softsign}", {3, 5, 7}, {0.0f}, 5.0f);
}

// --- in place ---------------------------------------------------------------------------------

TEST(ActivationLayers, InPlaceMatchesOutOfPlace) {
  for (const char* yaml :
       {"{name: a, type: ELU, alpha: 0.5}", "{name: a, type: Sigmoid}", "{name: a, type: TanH}",
        "{name: a, type: Clip, min: -1, max: 2}", "{name: a, type: Swish, beta: 0.7}",
        "{name: a, type: SiLU}", "{name: a, type: GELU}",
        "{name: a, type: GELU, approximate: tanh}", "{name: a, type: Hardsigmoid}",
        "{name: a, type: Hardswish}", "{name: a, type: Mish}", "{name: a, type: Softsign}",
        "{name: a, type: PReLU}", "{name: a, type: PReLU, channel_shared: true}",
        "{name: a, type: PReLU, filler: {type: uniform, min: -1, max: 1}}"}) {
    expect_in_place_matches(yaml, {3, 4, 5});
  }
}

// The clamp convention at the ends, in place too: x = min and x = max pass the gradient.
TEST(ClipLayer, EndsPassTheGradientInPlace) {
  Context ctx;
  LayerHarness h("{name: c, type: Clip, min: 0, max: 6}", {{6}}, ctx);
  std::vector<Blob*> same = {h.bottom[0]};
  h.set_bottom(0, {-1, 0, 3, 6, 7, 6.5f});
  h.layer->reshape(same, same, ctx);
  h.layer->forward(same, same, ctx);
  EXPECT_EQ(h.bottom[0]->value.to_vector(), (std::vector<float>{0, 0, 3, 6, 6, 6}));
  h.bottom[0]->grad.fill(1.0f);
  h.layer->backward(same, {true}, same, ctx);
  EXPECT_EQ(h.bottom[0]->grad.to_vector(), (std::vector<float>{0, 1, 1, 1, 0, 0}));
}

TEST(SiLULayer, IsSwishWithBetaOne) {
  Context ctx;
  LayerHarness silu("{name: s, type: SiLU}", {{7}}, ctx),
      swish("{name: s, type: Swish}", {{7}}, ctx);
  const std::vector<float> x = {-3, -1, -0.25f, 0, 0.5f, 1, 4};
  silu.set_bottom(0, x);
  swish.set_bottom(0, x);
  silu.forward();
  swish.forward();
  EXPECT_EQ(silu.top[0]->value.to_vector(), swish.top[0]->value.to_vector());
  EXPECT_NEAR(silu.top[0]->value.to_vector()[5], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

// --- PReLU's parameter ------------------------------------------------------------------------

TEST(PReLULayer, WeightNameShapeAndDefaultFiller) {
  Context ctx;
  LayerHarness per_channel("{name: p, type: PReLU}", {{2, 3, 4}}, ctx);
  ASSERT_EQ(per_channel.layer->params().size(), 1u);
  const Param& w = per_channel.layer->params()[0];
  EXPECT_EQ(w.name, "p.weight");
  EXPECT_EQ(w.value.shape(), (Shape{3}));
  EXPECT_EQ(w.value.to_vector(), (std::vector<float>{0.25f, 0.25f, 0.25f}));
  LayerHarness shared(
      "{name: q, type: PReLU, channel_shared: true, filler: {type: constant, "
      "value: 0.1}}",
      {{2, 3, 4}}, ctx);
  EXPECT_EQ(shared.layer->params()[0].value.shape(), (Shape{1}));
  EXPECT_EQ(shared.layer->params()[0].value.to_vector(), (std::vector<float>{0.1f}));
}

TEST(PReLULayer, SlopeGradientAccumulatesAndFrozenSlopeHasNone) {
  Context ctx;
  LayerHarness h("{name: p, type: PReLU}", {{2, 3, 4}}, ctx);
  h.set_bottom(0, random_values(24, -1, 1, 3));
  h.forward();
  h.top[0]->grad.copy_from(Tensor::from_vector({2, 3, 4}, random_values(24, -1, 1, 4)));
  Param& w = h.layer->params()[0];
  w.grad.fill(0.0f);
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const std::vector<float> once = w.grad.to_vector();
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  const std::vector<float> twice = w.grad.to_vector();
  for (size_t c = 0; c < once.size(); ++c) {
    EXPECT_NE(once[c], 0.0f);
    EXPECT_FLOAT_EQ(twice[c], 2 * once[c]);
  }

  LayerHarness frozen("{name: p, type: PReLU, param: {weight: {lr_mult: 0}}}", {{2, 3, 4}}, ctx);
  frozen.set_bottom(0, random_values(24, -1, 1, 3));
  frozen.forward();
  frozen.top[0]->grad.fill(1.0f);
  frozen.layer->params()[0].grad.fill(7.0f);
  frozen.layer->backward(frozen.top, {true}, frozen.bottom, ctx);
  EXPECT_EQ(frozen.layer->params()[0].grad.to_vector(), (std::vector<float>{7, 7, 7}));
}

// --- configuration errors: the message names the layer and the key ---------------------------

TEST(ActivationLayers, BadParametersAreConfigErrors) {
  expect_layer_error("{name: e1, type: ELU, alpha: -1}", {{2, 3}}, {"layer 'e1'", "alpha"});
  expect_layer_error("{name: c1, type: Clip, min: 2, max: 1}", {{2, 3}}, {"layer 'c1'", "max"});
  expect_layer_error("{name: c2, type: Clip, min: 0}", {{2, 3}}, {"layer 'c2'", "max"});
  expect_layer_error("{name: g1, type: GELU, approximate: fast}", {{2, 3}},
                     {"layer 'g1'", "approximate", "fast"});
  expect_layer_error("{name: p1, type: PReLU}", {{6}}, {"layer 'p1'", "channel"});
  expect_layer_error("{name: t1, type: TanH, slope: 2}", {{2, 3}}, {"slope"});  // unknown key
}

}  // namespace
}  // namespace crema::testing
