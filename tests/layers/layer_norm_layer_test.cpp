// The LayerNorm layer on the CPU: numerical gradient checks over the last axis, over the channels
// of NCHW, without affine parameters and with a frozen weight; PyTorch's nn.LayerNorm and
// ConvNeXt's LayerNorm2d (tests/fixtures/zoo_layer_fixtures.safetensors) through the layer, its
// parameters' names and shapes, and its configuration errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/fixtures/safetensors_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/layer_checks.h"

namespace crema::testing {
namespace {

void check(const std::string& yaml, const Shape& shape, uint64_t seed,
           const GradientCheckOptions& options = {}) {
  SCOPED_TRACE(yaml);
  Context ctx;
  LayerHarness h(yaml, {shape}, ctx, 1, Phase::train, DType::f64);
  for (Param& p : h.layer->params()) {
    set_values(p.value, random_values(size_t(p.value.numel()), 0.5f, 1.5f, seed));
  }
  h.set_bottom(0, random_values(size_t(shape_numel(shape)), -2.0f, 2.0f, seed + 1));
  check_gradients(h, options);
}

TEST(LayerNormLayer, GradientLastAxis) {
  check("{name: ln, type: LayerNorm}", {3, 7}, 1);
  check("{name: ln, type: LayerNorm, eps: 1e-6}", {2, 3, 4, 5}, 3);
}

TEST(LayerNormLayer, GradientChannelsOfNCHW) {
  check("{name: ln, type: LayerNorm, axis: 1, eps: 1e-6}", {2, 5, 3, 4}, 5);
  // Three channels: where their spread is small the curvature (about rstd^2) is large; a central
  // difference of step 1e-2 would measure it, the float64 check's 1e-6 does not.
  check("{name: ln, type: LayerNorm, axis: 1}", {1, 3, 1, 7}, 7);
}

TEST(LayerNormLayer, GradientWithoutAffineAndFrozen) {
  check("{name: ln, type: LayerNorm, elementwise_affine: false}", {4, 6}, 9);
  GradientCheckOptions bottom_only;  // the frozen weight has no gradient to check
  bottom_only.check_params = false;
  check("{name: ln, type: LayerNorm, axis: 1, param: {weight: {lr_mult: 0}}}", {2, 4, 3, 3}, 11,
        bottom_only);
}

// PyTorch's values through the layer: y, dx and the parameter gradients, named as torch names
// them.
TEST(LayerNormLayer, MatchesPyTorch) {
  const SafetensorsFixture f("zoo_layer_fixtures.safetensors");
  for (const auto& [name, keys] : std::vector<std::pair<std::string, std::string>>{
           {"ln_last", "eps: 1e-6"}, {"ln_channels", "axis: 1, eps: 1e-6"}}) {
    SCOPED_TRACE(name);
    Context ctx;
    LayerHarness h("{name: features.0.1, type: LayerNorm, " + keys + "}", {f.shape(name + ".x")},
                   ctx);
    std::vector<Param>& params = h.layer->params();
    ASSERT_EQ(params.size(), 2u);
    EXPECT_EQ(params[0].name, "features.0.1.weight");
    EXPECT_EQ(params[1].name, "features.0.1.bias");
    EXPECT_EQ(params[0].value.shape(), f.shape(name + ".weight"));
    params[0].value.copy_from(f.input(name + ".weight"));
    params[1].value.copy_from(f.input(name + ".bias"));
    h.set_bottom(0, f.floats(name + ".x"));
    h.forward();
    h.top[0]->grad.copy_from(f.input(name + ".dy"));
    for (Param& p : params) p.grad.fill(0.0f);
    h.layer->backward(h.top, {true}, h.bottom, ctx);
    EXPECT_LT(kernels::testing::rel_error(h.top[0]->value.to_vector(), f.doubles(name + ".y")),
              1e-6);
    EXPECT_LT(kernels::testing::rel_error(h.bottom[0]->grad.to_vector(), f.doubles(name + ".dx")),
              1e-6);
    EXPECT_LT(kernels::testing::rel_error(params[0].grad.to_vector(), f.doubles(name + ".dweight")),
              1e-6);
    EXPECT_LT(kernels::testing::rel_error(params[1].grad.to_vector(), f.doubles(name + ".dbias")),
              1e-6);
  }
}

TEST(LayerNormLayer, Errors) {
  expect_layer_error("{name: ln, type: LayerNorm, axis: 4}", {{2, 3, 4, 5}},
                     {"layer 'ln'", "axis"});
  expect_layer_error("{name: ln, type: LayerNorm, eps: 0}", {{2, 3}}, {"layer 'ln'", "eps"});
  expect_layer_error("{name: ln, type: LayerNorm, eps: -1}", {{2, 3}}, {"layer 'ln'", "eps"});
}

}  // namespace
}  // namespace crema::testing
