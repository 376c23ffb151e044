// BatchNormReLU layer: numerical gradient checks in float64 of both forms (relu(bn(x)) and
// relu(bn(x) + r)) with batch statistics, running statistics and without affine parameters; the
// parameter and buffer names (the `name:` key's, as BatchNorm's); frozen parameters; errors
// naming the layer. In place, and the same bits as the unfused layers:
// tests/core/net_fusion_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/layer_checks.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

// gamma and beta neither 1 nor 0 (some gamma negative), running statistics neither 0 nor 1.
void set_state(LayerHarness& h, uint64_t seed) {
  std::vector<Param>& params = h.layer->params();
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t n = size_t(params[i].value.numel());
    set_values(params[i].value,
               random_values(n, i == 0 ? -1.5f : -0.5f, i == 0 ? 1.5f : 0.5f, seed + i));
  }
  const size_t C = size_t(h.layer->buffers()[0].value.numel());
  set_values(h.layer->buffers()[0].value, random_values(C, -0.5f, 0.5f, seed + 2));
  set_values(h.layer->buffers()[1].value, random_values(C, 0.5f, 2.0f, seed + 3));
}

void gradient_check(const std::string& yaml, const Shape& shape, bool residual, Phase phase) {
  SCOPED_TRACE(yaml + " " + shape_str(shape) + (residual ? " residual " : " ") + phase_name(phase));
  Context ctx;
  const std::vector<Shape> bottoms =
      residual ? std::vector<Shape>{shape, shape} : std::vector<Shape>{shape};
  LayerHarness h(yaml, bottoms, ctx, 1, phase, DType::f64);
  for (size_t b = 0; b < bottoms.size(); ++b) {
    h.set_bottom(b, random_values(size_t(shape_numel(shape)), -1.5f, 1.5f, 3 + b));
  }
  set_state(h, 5);
  check_gradients(h);
}

TEST(BatchNormReLULayer, GradientTrainPhase) {
  gradient_check("{name: bn, type: BatchNormReLU}", {2, 3, 3, 5}, false, Phase::train);
  gradient_check("{name: bn, type: BatchNormReLU, eps: 1e-3, momentum: 0.3}", {7, 4}, false,
                 Phase::train);
}

TEST(BatchNormReLULayer, GradientResidualTrainPhase) {
  gradient_check("{name: bn, type: BatchNormReLU}", {1, 3, 5, 3}, true, Phase::train);
  gradient_check("{name: bn, type: BatchNormReLU, affine: false}", {3, 2, 3, 3}, true,
                 Phase::train);
}

TEST(BatchNormReLULayer, GradientRunningStatistics) {
  gradient_check("{name: bn, type: BatchNormReLU}", {2, 3, 2, 3}, true, Phase::test);
  gradient_check("{name: bn, type: BatchNormReLU, use_global_stats: true}", {2, 3, 3, 1}, false,
                 Phase::train);
}

// The names come from the `name:` key (the BatchNorm's when the Net fuses), whatever the layer's.
TEST(BatchNormReLULayer, ParametersAndBuffersNamedAsBatchNorm) {
  Context ctx;
  LayerHarness h("{name: layer1.0.bn3, type: BatchNormReLU}", {{2, 3, 4, 4}, {2, 3, 4, 4}}, ctx);
  ASSERT_EQ(h.layer->params().size(), 2u);
  EXPECT_EQ(h.layer->params()[0].name, "layer1.0.bn3.weight");
  EXPECT_EQ(h.layer->params()[1].name, "layer1.0.bn3.bias");
  ASSERT_EQ(h.layer->buffers().size(), 3u);
  EXPECT_EQ(h.layer->buffers()[0].name, "layer1.0.bn3.running_mean");
  EXPECT_EQ(h.layer->buffers()[1].name, "layer1.0.bn3.running_var");
  EXPECT_EQ(h.layer->buffers()[2].name, "layer1.0.bn3.num_batches_tracked");
}

TEST(BatchNormReLULayer, FrozenParametersGetNoGradient) {
  check_frozen_parameters("name: bn, type: BatchNormReLU", {3, 4, 5, 5}, 3);
}

// With a residual, backward reads x and y, never r (the memory plan reuses r's bytes after the
// forward: core/layer.h backward_reads_bottom): overwriting r with NaN between the passes changes
// no bit of dx, dr, dgamma or dbeta, in place on x and not.
TEST(BatchNormReLULayer, ResidualBackwardDoesNotReadIt) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "not in place");
    auto gradients = [&](bool poison) {
      Context ctx;
      const Shape shape{3, 4, 3, 5};
      LayerHarness h("{name: bn, type: BatchNormReLU}", {shape, shape}, ctx);
      if (in_place) {
        h.top[0] = h.bottom[0];
        h.layer->reshape(h.bottom, h.top, ctx);
      }
      const size_t n = size_t(shape_numel(shape));
      for (size_t b = 0; b < 2; ++b) h.set_bottom(b, random_values(n, -1.5f, 1.5f, 3 + b));
      set_state(h, 5);
      h.layer->forward(h.bottom, h.top, ctx);
      EXPECT_EQ(h.layer->backward_reads_bottom(0), !in_place);
      EXPECT_FALSE(h.layer->backward_reads_bottom(1));
      EXPECT_TRUE(h.layer->backward_reads().tops);
      if (poison) ctx.fill(h.bottom[1]->value, std::nanf(""));
      set_values(h.top[0]->grad, random_values(n, -1.0f, 1.0f, 9));
      h.layer->backward(h.top, {true, true}, h.bottom, ctx);
      std::vector<std::vector<float>> out{h.bottom[0]->grad.to_vector(),
                                          h.bottom[1]->grad.to_vector()};
      for (const Param& p : h.layer->params()) out.push_back(p.grad.to_vector());
      return out;
    };
    EXPECT_EQ(gradients(true), gradients(false));
  }
}

TEST(BatchNormReLULayer, Errors) {
  expect_layer_error("{name: bn, type: BatchNormReLU, mode: per_activation}", {{2, 3, 4}},
                     {"layer 'bn'", "mode", "per_activation is not fused"});
  expect_layer_error("{name: bn, type: BatchNormReLU}", {{2, 3, 4}, {2, 3, 5}},
                     {"layer 'bn'", "residual", "[2, 3, 5]", "[2, 3, 4]"});
  expect_layer_error("{name: bn, type: BatchNormReLU}", {{1, 3}},
                     {"layer 'bn'", "one value per channel"});
}

}  // namespace
}  // namespace crema::testing
