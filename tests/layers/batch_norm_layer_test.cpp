// BatchNorm layer: numerical gradient checks (batch statistics in training; running statistics in
// the test phase and with use_global_stats; 2-D and 4-D; without affine parameters), PyTorch's
// golden values over two training steps and in eval mode through the layer, in place, frozen
// parameters, and configuration errors naming the layer and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tests/fixtures/norm_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

using kernels::testing::rel_error;

// Inputs with a different offset per channel (axis 1), so that a wrong channel shows.
std::vector<float> channel_values(const Shape& shape, uint64_t seed) {
  std::vector<float> v = random_values(size_t(shape_numel(shape)), -1.0f, 1.0f, seed);
  const int64_t C = shape[1], S = shape_count(shape, 2, int(shape.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] += 0.5f * float((int64_t(i) / S) % C);
  return v;
}

// Running statistics that are neither 0 nor 1.
void set_running_stats(LayerHarness& h, uint64_t seed) {
  Buffer& mean = h.layer->buffers()[0];
  Buffer& var = h.layer->buffers()[1];
  const size_t C = size_t(mean.value.numel());
  set_values(mean.value, random_values(C, -0.5f, 0.5f, seed));
  set_values(var.value, random_values(C, 0.5f, 2.0f, seed + 1));
}

void set_affine(LayerHarness& h, uint64_t seed) {
  for (Param& p : h.layer->params()) {
    const size_t n = size_t(p.value.numel());
    set_values(p.value, random_values(n, 0.5f, 1.5f, seed++));
  }
}

void gradient_check(const std::string& yaml, const Shape& shape, Phase phase,
                    bool random_stats = false) {
  SCOPED_TRACE(yaml + " " + shape_str(shape) + " " + phase_name(phase));
  Context ctx;
  LayerHarness h(yaml, {shape}, ctx, 1, phase, DType::f64);
  h.set_bottom(0, channel_values(shape, 3));
  set_affine(h, 5);
  if (random_stats) set_running_stats(h, 7);
  check_gradients(h);
}

TEST(BatchNormLayer, GradientTrainPhase4d) {
  gradient_check("{name: bn, type: BatchNorm}", {2, 3, 3, 4}, Phase::train);
}

TEST(BatchNormLayer, GradientTrainPhase2d) {
  gradient_check("{name: bn, type: BatchNorm, eps: 1e-3, momentum: 0.3}", {5, 4}, Phase::train);
}

TEST(BatchNormLayer, GradientTrainPhaseWithoutAffine) {
  gradient_check("{name: bn, type: BatchNorm, affine: false}", {3, 2, 2, 3}, Phase::train);
}

TEST(BatchNormLayer, GradientTestPhase4d) {
  gradient_check("{name: bn, type: BatchNorm}", {2, 3, 2, 3}, Phase::test, true);
}

TEST(BatchNormLayer, GradientTestPhase2dWithoutAffine) {
  gradient_check("{name: bn, type: BatchNorm, affine: false}", {4, 5}, Phase::test, true);
}

TEST(BatchNormLayer, GradientUseGlobalStatsInTraining) {
  gradient_check("{name: bn, type: BatchNorm, use_global_stats: true}", {2, 3, 2, 2}, Phase::train,
                 true);
}

// The layer, step by step, against PyTorch's nn.BatchNorm1d/2d (train, train, eval).
void expect_matches_pytorch(const std::string& name, const std::string& yaml) {
  SCOPED_TRACE(name);
  NormFixture f;
  auto key = [&](const std::string& k) { return name + "." + k; };
  Context ctx;
  const Shape shape = f.shape(key("x1"));
  LayerHarness train(yaml, {shape}, ctx, 1, Phase::train);
  std::vector<Param>& params = train.layer->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "bn.weight");
  EXPECT_EQ(params[1].name, "bn.bias");
  EXPECT_EQ(params[0].value.to_vector(), std::vector<float>(size_t(shape[1]), 1.0f));
  EXPECT_EQ(params[1].value.to_vector(), std::vector<float>(size_t(shape[1]), 0.0f));
  params[0].value.copy_from(f.input(key("weight")));
  params[1].value.copy_from(f.input(key("bias")));

  train.set_bottom(0, f.floats(key("x1")));
  train.forward();
  EXPECT_LT(rel_error(train.top[0]->value.to_vector(), f.doubles(key("y1"))), 1e-5);
  train.top[0]->grad.copy_from(f.input(key("dy")));
  train.layer->backward(train.top, {true}, train.bottom, ctx);
  EXPECT_LT(rel_error(train.bottom[0]->grad.to_vector(), f.doubles(key("dx1"))), 1e-5);
  EXPECT_LT(rel_error(params[0].grad.to_vector(), f.doubles(key("dweight1"))), 1e-5);
  EXPECT_LT(rel_error(params[1].grad.to_vector(), f.doubles(key("dbias1"))), 1e-5);

  train.set_bottom(0, f.floats(key("x2")));
  train.forward();
  EXPECT_LT(rel_error(train.top[0]->value.to_vector(), f.doubles(key("y2"))), 1e-5);
  const std::vector<Buffer>& buffers = train.layer->buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0].name, "bn.running_mean");
  EXPECT_EQ(buffers[1].name, "bn.running_var");
  EXPECT_EQ(buffers[2].name, "bn.num_batches_tracked");
  EXPECT_LT(rel_error(buffers[0].value.to_vector(), f.doubles(key("running_mean"))), 1e-5);
  EXPECT_LT(rel_error(buffers[1].value.to_vector(), f.doubles(key("running_var"))), 1e-5);
  EXPECT_EQ(kernels::testing::to_double(buffers[2].value), f.doubles(key("num_batches_tracked")));

  // The test net's layer sees the train net's parameters and running statistics.
  LayerHarness eval(yaml, {shape}, ctx, 1, Phase::test);
  for (size_t i = 0; i < params.size(); ++i)
    eval.layer->params()[i].value.copy_from(params[i].value);
  for (size_t i = 0; i < buffers.size(); ++i) {
    eval.layer->buffers()[i].value.copy_from(buffers[i].value);
  }
  eval.set_bottom(0, f.floats(key("x1")));
  eval.forward();
  EXPECT_LT(rel_error(eval.top[0]->value.to_vector(), f.doubles(key("eval_y"))), 1e-5);
  eval.top[0]->grad.copy_from(f.input(key("dy")));
  eval.layer->backward(eval.top, {true}, eval.bottom, ctx);
  EXPECT_LT(rel_error(eval.bottom[0]->grad.to_vector(), f.doubles(key("eval_dx"))), 1e-5);
  EXPECT_LT(rel_error(eval.layer->params()[0].grad.to_vector(), f.doubles(key("eval_dweight"))),
            1e-5);
  EXPECT_LT(rel_error(eval.layer->params()[1].grad.to_vector(), f.doubles(key("eval_dbias"))),
            1e-5);
  // Evaluation leaves the running statistics alone.
  EXPECT_LT(rel_error(eval.layer->buffers()[0].value.to_vector(), f.doubles(key("running_mean"))),
            1e-5);
  EXPECT_EQ(eval.layer->buffers()[2].value.to_vector(), buffers[2].value.to_vector());
}

TEST(BatchNormLayer, MatchesPyTorchBatchNorm2d) {
  expect_matches_pytorch("bn2d", "{name: bn, type: BatchNorm}");
}

TEST(BatchNormLayer, MatchesPyTorchBatchNorm1d) {
  expect_matches_pytorch("bn1d", "{name: bn, type: BatchNorm, eps: 1e-3, momentum: 0.25}");
}

TEST(BatchNormLayer, InPlaceMatchesOutOfPlace) {
  for (const Shape& shape : {Shape{3, 4, 2, 3}, Shape{6, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    Context ctx;
    LayerHarness h("{name: bn, type: BatchNorm}", {shape}, ctx);
    set_affine(h, 2);
    const std::vector<float> x = channel_values(shape, 4);
    const Tensor dy =
        Tensor::from_vector(shape, random_values(size_t(shape_numel(shape)), -1, 1, 6));
    h.set_bottom(0, x);
    h.forward();
    const std::vector<float> y = h.top[0]->value.to_vector();
    h.top[0]->grad.copy_from(dy);
    h.layer->backward(h.top, {true}, h.bottom, ctx);
    const std::vector<float> dx = h.bottom[0]->grad.to_vector();
    const std::vector<float> dgamma = h.layer->params()[0].grad.to_vector();

    std::vector<Blob*> same = {h.bottom[0]};
    for (Param& p : h.layer->params()) p.grad.fill(0.0f);
    h.layer->reshape(same, same, ctx);
    h.layer->forward(same, same, ctx);
    EXPECT_EQ(h.bottom[0]->value.to_vector(), y);
    h.bottom[0]->grad.copy_from(dy);
    h.layer->backward(same, {true}, same, ctx);
    EXPECT_EQ(h.bottom[0]->grad.to_vector(), dx);
    EXPECT_EQ(h.layer->params()[0].grad.to_vector(), dgamma);
  }
}

TEST(BatchNormLayer, FrozenParametersGetNoGradient) {
  Context ctx;
  const Shape shape{4, 3, 2, 2};
  LayerHarness h("{name: bn, type: BatchNorm, param: {weight: {lr_mult: 0}}}", {shape}, ctx);
  h.set_bottom(0, channel_values(shape, 8));
  h.forward();
  h.top[0]->grad.copy_from(
      Tensor::from_vector(shape, random_values(size_t(shape_numel(shape)), -1, 1, 9)));
  h.layer->backward(h.top, {true}, h.bottom, ctx);
  EXPECT_EQ(h.layer->params()[0].grad.to_vector(), std::vector<float>(3, 0.0f));
  EXPECT_NE(h.layer->params()[1].grad.to_vector(), std::vector<float>(3, 0.0f));
}

TEST(BatchNormLayer, WithoutAffineHasNoParameters) {
  Context ctx;
  LayerHarness h("{name: bn, type: BatchNorm, affine: false}", {{2, 3, 4}}, ctx);
  EXPECT_TRUE(h.layer->params().empty());
  EXPECT_EQ(h.layer->buffers().size(), 3u);
}

void expect_error(const std::string& yaml, const Shape& shape, Phase phase,
                  const std::vector<std::string>& parts) {
  SCOPED_TRACE(yaml);
  Context ctx;
  try {
    LayerHarness h(yaml, {shape}, ctx, 1, phase);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

TEST(BatchNormLayer, BadKeysAreErrors) {
  expect_error("{name: bn, type: BatchNorm, eps: -1e-5}", {2, 3}, Phase::train,
               {"test:1:", "layer 'bn' (BatchNorm)", "eps"});
  expect_error("{name: bn, type: BatchNorm, momentum: 1.5}", {2, 3}, Phase::train,
               {"test:1:", "layer 'bn' (BatchNorm)", "momentum"});
  expect_error("{name: bn, type: BatchNorm, momentum: -0.1}", {2, 3}, Phase::train,
               {"layer 'bn' (BatchNorm)", "momentum"});
  expect_error("{name: bn, type: BatchNorm, affine: maybe}", {2, 3}, Phase::train, {"affine"});
  expect_error("{name: bn, type: BatchNorm, moving_average_fraction: 0.9}", {2, 3}, Phase::train,
               {"moving_average_fraction"});
  expect_error("{name: bn, type: BatchNorm}", {6}, Phase::train, {"layer 'bn'", "2 axes"});
  // One value per channel: no batch statistics (fine in the test phase).
  expect_error("{name: bn, type: BatchNorm}", {1, 3}, Phase::train, {"layer 'bn'", "one value"});
  Context ctx;
  LayerHarness ok("{name: bn, type: BatchNorm}", {{1, 3}}, ctx, 1, Phase::test);
}

}  // namespace
}  // namespace crema::testing
