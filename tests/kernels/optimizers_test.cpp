// Optimizer updates on the CPU: Caffe's SGD by hand and against PyTorch's form, every rule's CPU
// path against ref<double> with gradient scaling and clipping over several parameters (one of them
// large enough for threads), the clipping factor's independence of the thread count, the state
// names and the dispatch's checks. (Each rule against torch.optim: tests/optim/solvers_test.cpp.)
#include "kernels/optimizers/optimizers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/optimizer_test_util.h"

namespace crema::kernels {
namespace {

OptimizerRule sgd_rule(double momentum) {
  OptimizerRule rule;
  rule.momentum = momentum;
  return rule;
}

TEST(OptimizerSgd, TwoStepsByHand) {
  Context ctx;
  Tensor w = Tensor::from_vector({2}, {1.0f, -2.0f});
  Tensor v = Tensor::from_vector({2}, {0.0f, 0.0f});
  Tensor g = Tensor::from_vector({2}, {0.5f, 0.25f});
  const std::vector<OptimizerTensorSet> sets = {{&w, &g, {&v}, 0.1f, 0.01f}};
  // Step 1: g' = [0.5 + 0.01, 0.25 - 0.02] = [0.51, 0.23]; v = 0.1 g' = [0.051, 0.023];
  // w = [0.949, -2.023]; g consumed.
  optimizer_update(ctx, sgd_rule(0.9), 1, sets);
  EXPECT_NEAR(v.to_vector()[0], 0.051, 1e-7);
  EXPECT_NEAR(v.to_vector()[1], 0.023, 1e-7);
  EXPECT_NEAR(w.to_vector()[0], 0.949, 1e-6);
  EXPECT_NEAR(w.to_vector()[1], -2.023, 1e-6);
  EXPECT_EQ(g.to_vector(), (std::vector<float>{0.0f, 0.0f}));
  // Step 2: g' = [-0.3 + 0.00949, 0.1 - 0.02023] = [-0.29051, 0.07977];
  // v = 0.9 [0.051, 0.023] + 0.1 g' = [0.016849, 0.028677]; w = [0.932151, -2.051677].
  g.copy_from(Tensor::from_vector({2}, {-0.3f, 0.1f}));
  optimizer_update(ctx, sgd_rule(0.9), 2, sets);
  EXPECT_NEAR(v.to_vector()[0], 0.016849, 1e-7);
  EXPECT_NEAR(v.to_vector()[1], 0.028677, 1e-7);
  EXPECT_NEAR(w.to_vector()[0], 0.932151, 1e-6);
  EXPECT_NEAR(w.to_vector()[1], -2.051677, 1e-6);
}

// PyTorch's form: v = m v + g'; w -= lr v.
void pytorch_sgd_step(std::vector<double>& w, const std::vector<double>& g, std::vector<double>& v,
                      double lr, double momentum, double decay) {
  for (size_t i = 0; i < w.size(); ++i) {
    v[i] = momentum * v[i] + g[i] + decay * w[i];
    w[i] -= lr * v[i];
  }
}

TEST(OptimizerSgdRef, EqualsPyTorchAtAFixedRateOnly) {
  Random rng(5);
  const int64_t n = 16;
  std::vector<double> w_caffe = testing::to_double(testing::random_values(rng, n));
  std::vector<double> w_torch = w_caffe, v_caffe(size_t(n), 0.0), v_torch(size_t(n), 0.0);
  std::vector<std::vector<double>> grads;
  for (int step = 0; step < 6; ++step) {
    grads.push_back(testing::to_double(testing::random_values(rng, n)));
  }
  for (int step = 0; step < 3; ++step) {
    ref::sgd_update(n, w_caffe.data(), grads[step].data(), v_caffe.data(), 0.1, 0.9, 0.001);
    pytorch_sgd_step(w_torch, grads[step], v_torch, 0.1, 0.9, 0.001);
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(w_caffe[i], w_torch[i], 1e-14);
  // A step policy divides the rate by 10: the two forms now take different steps.
  for (int step = 3; step < 6; ++step) {
    ref::sgd_update(n, w_caffe.data(), grads[step].data(), v_caffe.data(), 0.01, 0.9, 0.001);
    pytorch_sgd_step(w_torch, grads[step], v_torch, 0.01, 0.9, 0.001);
  }
  double max_gap = 0;
  for (int64_t i = 0; i < n; ++i) max_gap = std::max(max_gap, std::abs(w_caffe[i] - w_torch[i]));
  EXPECT_GT(max_gap, 1e-3);
}

// Every rule, several parameters in one call (65537 elements takes the threaded path), the
// gradients averaged over 2 passes and clipped (max_norm below their norm), or not.
TEST(OptimizerCpu, EveryRuleMatchesReference) {
  const std::vector<int64_t> sizes = {1, 13, 500, 65537};
  for (const auto& [name, rule] : testing::rules_under_test()) {
    Random rng(11);
    const std::vector<testing::HostParam> start = testing::random_params(rng, rule, sizes);
    for (const GradientScaling scaling : {GradientScaling{}, GradientScaling{0.5f, 5.0f}}) {
      SCOPED_TRACE(name + (scaling.max_norm > 0 ? ", clipped" : ""));
      std::vector<testing::HostParam> params;
      for (const testing::HostParam& p : start) params.push_back(p.clone());
      const std::vector<testing::Expected> expected =
          testing::reference_step(rule, 3, scaling, params);
      const std::vector<OptimizerSlice> slices = testing::host_slices(params);
      cpu::optimizer_update(slices.data(), int(slices.size()), rule, 3, scaling, 2);
      for (size_t k = 0; k < sizes.size(); ++k) {
        EXPECT_LT(testing::rel_error(params[k].w.to_vector(), expected[k].w), 1e-6) << k;
        for (size_t j = 0; j < params[k].state.size(); ++j) {
          if (!params[k].state[j].defined()) continue;
          EXPECT_LT(testing::rel_error(params[k].state[j].to_vector(), expected[k].state[j]), 1e-6)
              << "parameter " << k << ", slot " << j;
        }
        EXPECT_EQ(params[k].g.to_vector(), std::vector<float>(size_t(sizes[k]), 0.0f)) << k;
      }
    }
  }
}

TEST(OptimizerCpu, ClippingIsTheSameForAnyThreadCount) {
  const OptimizerRule rule = testing::make_rule(OptimizerType::adam);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    Random rng(3);
    std::vector<testing::HostParam> params = testing::random_params(rng, rule, {70001, 200003});
    const std::vector<OptimizerSlice> slices = testing::host_slices(params);
    cpu::optimizer_update(slices.data(), 2, rule, 1, {1.0f, 1.0f}, threads);
    std::vector<float> w = params[1].w.to_vector();
    if (first.empty()) first = w;
    EXPECT_EQ(w, first) << threads << " threads";
  }
}

TEST(OptimizerCpu, ClippingLeavesSmallGradientsAlone) {
  // ||g|| = 5: max_norm 10 leaves it (factor 1 exactly), max_norm 1 scales by 1 / (5 + 1e-6).
  for (float max_norm : {10.0f, 1.0f}) {
    Tensor w = Tensor::from_vector({2}, {0.0f, 0.0f}), g = Tensor::from_vector({2}, {3.0f, 4.0f});
    Context ctx;
    optimizer_update(ctx, sgd_rule(0.0), 1, {{&w, &g, {}, 1.0f, 0.0f}}, {1.0f, max_norm});
    const double factor = max_norm > 5 ? 1.0 : 1.0 / (5.0 + 1e-6);
    EXPECT_FLOAT_EQ(w.to_vector()[0], float(-3.0 * factor));
    EXPECT_FLOAT_EQ(w.to_vector()[1], float(-4.0 * factor));
  }
}

TEST(OptimizerState, PyTorchNames) {
  auto names = [](OptimizerType type, double momentum = 0.0, bool centered = false) {
    std::vector<std::string> out;
    for (int j = 0; j < kMaxOptimizerSlots; ++j) {
      out.push_back(optimizer_slot_name(testing::make_rule(type, momentum, centered), j));
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(OptimizerType::sgd), (V{"", "", ""}));
  EXPECT_EQ(names(OptimizerType::sgd, 0.9), (V{"momentum_buffer", "", ""}));
  EXPECT_EQ(names(OptimizerType::nesterov, 0.9), (V{"momentum_buffer", "", ""}));
  EXPECT_EQ(names(OptimizerType::adam), (V{"exp_avg", "exp_avg_sq", ""}));
  EXPECT_EQ(names(OptimizerType::adamw), (V{"exp_avg", "exp_avg_sq", ""}));
  EXPECT_EQ(names(OptimizerType::rmsprop), (V{"square_avg", "", ""}));
  EXPECT_EQ(names(OptimizerType::rmsprop, 0.5, true),
            (V{"square_avg", "momentum_buffer", "grad_avg"}));
  EXPECT_EQ(names(OptimizerType::adagrad), (V{"sum", "", ""}));
  EXPECT_FLOAT_EQ(optimizer_slot_initial_value(testing::make_rule(OptimizerType::adagrad), 0),
                  0.1f);
  EXPECT_FLOAT_EQ(optimizer_slot_initial_value(testing::make_rule(OptimizerType::adam), 1), 0.0f);
}

TEST(OptimizerUpdate, NamesTheSetAndTensorThatDoNotFit) {
  Context ctx;
  const OptimizerRule adam = testing::make_rule(OptimizerType::adam);
  Tensor w({4}), g({4}), m({4}), v({4}), v5({5});
  auto message = [&](const std::vector<OptimizerTensorSet>& sets, int64_t step) {
    try {
      optimizer_update(ctx, adam, step, sets);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string shape =
      message({{&w, &g, {&m, &v}, 0.1f, 0.0f}, {&w, &g, {&m, &v5}, 0.1f, 0.0f}}, 1);
  EXPECT_NE(shape.find("set 1"), std::string::npos) << shape;
  EXPECT_NE(shape.find("exp_avg_sq is"), std::string::npos) << shape;
  const std::string missing = message({{&w, &g, {&m}, 0.1f, 0.0f}}, 1);
  EXPECT_NE(missing.find("exp_avg_sq) is missing"), std::string::npos) << missing;
  const std::string extra = message({{&w, &g, {&m, &v, &v}, 0.1f, 0.0f}}, 1);
  EXPECT_NE(extra.find("slot 2 is unused"), std::string::npos) << extra;
  const std::string step = message({{&w, &g, {&m, &v}, 0.1f, 0.0f}}, 0);
  EXPECT_NE(step.find("step is 0"), std::string::npos) << step;
}

}  // namespace
}  // namespace crema::kernels
