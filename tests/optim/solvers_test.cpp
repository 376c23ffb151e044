// The solvers against PyTorch: two explicit steps of every rule (with weight decay, lr_mult and
// decay_mult != 1, clipping) against torch.optim on the same tensors (fixtures written once by
// tests/fixtures/make_solver_fixtures.py), then what the training loop relies on: iter_size
// averaging, frozen parameters, the state's names and an exact resume, and the config's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/serialization.h"
#include "optim/solver.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema {
namespace {

using kernels::testing::rel_error;

const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> tensors = [] {
    std::map<std::string, Tensor> m;
    for (auto& [name, t] :
         load_safetensors(CREMA_SOURCE_DIR "/tests/fixtures/solvers.safetensors")) {
      m[name] = t;
    }
    return m;
  }();
  return tensors;
}

const Tensor& fixture(const std::string& name) {
  const auto it = fixtures().find(name);
  if (it == fixtures().end()) throw Error("no fixture tensor '" + name + "'");
  return it->second;
}

std::vector<double> doubles(const Tensor& t) {
  if (t.dtype() == DType::f64) return {t.data<double>(), t.data<double>() + t.numel()};
  return kernels::testing::to_double(t);
}

// The case names of make_solver_fixtures.py and the same solvers in crema's YAML.
struct Case {
  std::string name, yaml;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"sgd", "{type: SGD, base_lr: 0.1, momentum: 0.9, weight_decay: 0.01}"},
      {"sgd_plain", "{type: SGD, base_lr: 0.1}"},
      {"nesterov", "{type: SGD, base_lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}"},
      {"adam", "{type: Adam, base_lr: 0.01, weight_decay: 0.01}"},
      {"adam_betas", "{type: Adam, base_lr: 0.01, beta1: 0.8, beta2: 0.95, eps: 1.0e-6}"},
      {"adamw", "{type: AdamW, base_lr: 0.01, weight_decay: 0.1}"},
      {"rmsprop", "{type: RMSProp, base_lr: 0.01, weight_decay: 0.01}"},
      {"rmsprop_momentum", "{type: RMSProp, base_lr: 0.01, momentum: 0.9}"},
      {"rmsprop_centered", "{type: RMSProp, base_lr: 0.01, alpha: 0.9, centered: true}"},
      {"rmsprop_centered_momentum",
       "{type: RMSProp, base_lr: 0.01, alpha: 0.9, momentum: 0.5, centered: true, "
       "weight_decay: 0.01}"},
      {"adagrad",
       "{type: AdaGrad, base_lr: 0.1, lr_decay: 0.01, initial_accumulator_value: 0.1, "
       "weight_decay: 0.01}"},
      {"adagrad_plain", "{type: AdaGrad, base_lr: 0.1}"},
      {"sgd_clip",
       "{type: SGD, base_lr: 0.1, momentum: 0.9, weight_decay: 0.01, clip_gradients: 0.5}"},
      {"adam_clip", "{type: Adam, base_lr: 0.01, weight_decay: 0.01, clip_gradients: 1.0}"},
  };
  return all;
}

std::unique_ptr<Solver> solver_from(const std::string& yaml) {
  return make_solver(parse_config(yaml, "s.yaml"), 100);
}

// The fixtures' two parameters: a [3, 5] (lr_mult 1, decay_mult 1), b [7] (2, 0.5).
struct TwoParams {
  Param a, b;
  TwoParams() {
    a.name = "a";
    a.value = fixture("a.w0").clone();
    b.name = "b";
    b.value = fixture("b.w0").clone();
    b.lr_mult = 2.0f;
    b.decay_mult = 0.5f;
  }
  std::vector<Param*> list() { return {&a, &b}; }
  void set_grads(int step) {
    a.grad = fixture("a.g" + std::to_string(step)).clone();
    b.grad = fixture("b.g" + std::to_string(step)).clone();
  }
};

TEST(Solvers, TwoStepsMatchTorchOptim) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Context ctx;
    auto solver = solver_from(c.yaml);
    TwoParams p;
    for (int step = 1; step <= 2; ++step) {
      p.set_grads(step);
      solver->step(p.list(), step - 1, ctx);
      for (Param* param : p.list()) {
        const std::string expected = c.name + "." + param->name + ".w" + std::to_string(step);
        EXPECT_LT(rel_error(param->value.to_vector(), doubles(fixture(expected))), 1e-6)
            << expected;
        EXPECT_EQ(param->grad.to_vector(), std::vector<float>(size_t(param->grad.numel()), 0.0f));
      }
    }
    // The state after two steps; Caffe's SGD history is lr times PyTorch's momentum buffer.
    const bool caffe_sgd = solver->config().rule.type == kernels::OptimizerType::sgd;
    size_t expected_entries = 0;
    for (const auto& entry : fixtures())
      expected_entries += entry.first.rfind(c.name + ".", 0) == 0;
    const auto state = solver->state(p.list(), ctx);
    EXPECT_EQ(state.size() + 4, expected_entries) << "besides w1 and w2 of a and b";
    for (const auto& [name, t] : state) {
      std::vector<double> expected = doubles(fixture(c.name + "." + name));
      const double lr = solver->learning_rate(1) * (name[0] == 'b' ? 2.0 : 1.0);
      if (caffe_sgd) {
        for (double& x : expected) x *= lr;
      }
      EXPECT_LT(rel_error(t.to_vector(), expected), 1e-6) << name;
    }
  }
}

// k passes whose gradients accumulate, with iter_size k, take the step one pass with their mean
// gradient takes (clipping acts on the mean).
TEST(Solvers, IterSizeAveragesTheAccumulatedGradients) {
  const std::vector<std::string> rules = {
      "type: SGD, momentum: 0.9, weight_decay: 0.01", "type: Adam, clip_gradients: 0.3",
      "type: RMSProp, momentum: 0.5, centered: true", "type: AdaGrad, clip_gradients: 0.3"};
  for (const std::string& rule : rules) {
    SCOPED_TRACE(rule);
    Context ctx;
    auto accumulating = solver_from("{base_lr: 0.01, iter_size: 3, " + rule + "}");
    auto averaged = solver_from("{base_lr: 0.01, " + rule + "}");
    EXPECT_EQ(accumulating->iter_size(), 3);
    TwoParams p, q;
    Random rng(4);
    for (int64_t iter = 0; iter < 2; ++iter) {
      for (Param* param : p.list()) {
        const int64_t n = param->value.numel();
        std::vector<float> sum(size_t(n), 0.0f);
        std::vector<double> exact(size_t(n), 0.0);
        for (int pass = 0; pass < 3; ++pass) {
          const std::vector<float> g = kernels::testing::random_values(rng, n);
          for (int64_t i = 0; i < n; ++i) sum[i] += g[i], exact[i] += g[i];
        }
        param->grad = Tensor::from_vector(param->value.shape(), sum);
        Param* twin = param == &p.a ? &q.a : &q.b;
        std::vector<float> mean(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) mean[i] = float(exact[i] / 3.0);
        twin->grad = Tensor::from_vector(param->value.shape(), mean);
      }
      accumulating->step(p.list(), iter, ctx);
      averaged->step(q.list(), iter, ctx);
    }
    EXPECT_LT(rel_error(p.a.value.to_vector(), doubles(q.a.value)), 1e-6);
    EXPECT_LT(rel_error(p.b.value.to_vector(), doubles(q.b.value)), 1e-6);
  }
}

// A frozen parameter keeps its value and gradient, has no state and is left out of the norm.
TEST(Solvers, FrozenParametersAreSkipped) {
  Context ctx;
  const std::string yaml = "{type: Adam, base_lr: 0.01, clip_gradients: 0.5}";
  auto with_frozen = solver_from(yaml);
  auto alone = solver_from(yaml);
  TwoParams p, q;
  p.b.lr_mult = 0.0f;
  for (int step = 1; step <= 2; ++step) {
    p.set_grads(step);
    q.set_grads(step);
    with_frozen->step(p.list(), step - 1, ctx);
    alone->step({&q.a}, step - 1, ctx);
  }
  EXPECT_EQ(p.a.value.to_vector(), q.a.value.to_vector());
  EXPECT_EQ(p.b.value.to_vector(), fixture("b.w0").to_vector());
  EXPECT_EQ(p.b.grad.to_vector(), fixture("b.g2").to_vector());
  for (const auto& [name, t] : with_frozen->state(p.list(), ctx)) EXPECT_EQ(name[0], 'a') << name;
}

TEST(Solvers, StateNames) {
  Context ctx;
  auto names = [&](const std::string& yaml) {
    TwoParams p;
    std::vector<std::string> out;
    for (const auto& [name, t] : solver_from(yaml)->state(p.list(), ctx)) out.push_back(name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("{type: SGD, base_lr: 0.1, momentum: 0.9}"),
            (V{"a.momentum_buffer", "b.momentum_buffer"}));
  EXPECT_EQ(names("{type: SGD, base_lr: 0.1}"), V{});
  EXPECT_EQ(names("{type: AdamW, base_lr: 0.1}"),
            (V{"a.exp_avg", "a.exp_avg_sq", "b.exp_avg", "b.exp_avg_sq"}));
  EXPECT_EQ(names("{type: RMSProp, base_lr: 0.1, momentum: 0.9, centered: true}"),
            (V{"a.square_avg", "a.momentum_buffer", "a.grad_avg", "b.square_avg",
               "b.momentum_buffer", "b.grad_avg"}));
  EXPECT_EQ(names("{type: AdaGrad, base_lr: 0.1}"), (V{"a.sum", "b.sum"}));
  // Created before any step at the initial accumulator value.
  TwoParams p;
  const auto state = solver_from("{type: AdaGrad, base_lr: 0.1, initial_accumulator_value: 0.25}")
                         ->state(p.list(), ctx);
  EXPECT_EQ(state[1].second.to_vector(), std::vector<float>(7, 0.25f));
}

// Two steps equal one step, the state copied into a fresh solver, and its step at iter 1: the
// copied state (and the iteration number, not a counter) is all a resumed run needs.
TEST(Solvers, ResumeContinuesExactly) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Context ctx;
    TwoParams straight, first_half, resumed;
    auto solver = solver_from(c.yaml);
    for (int step = 1; step <= 2; ++step) {
      straight.set_grads(step);
      solver->step(straight.list(), step - 1, ctx);
    }
    auto before = solver_from(c.yaml);
    first_half.set_grads(1);
    before->step(first_half.list(), 0, ctx);
    auto after = solver_from(c.yaml);
    const auto saved = before->state(first_half.list(), ctx);
    const auto fresh = after->state(resumed.list(), ctx);
    ASSERT_EQ(saved.size(), fresh.size());
    for (size_t k = 0; k < saved.size(); ++k) {
      EXPECT_EQ(saved[k].first, fresh[k].first);
      Tensor into = fresh[k].second;  // shares the solver's storage
      into.copy_from(saved[k].second);
    }
    resumed.a.value.copy_from(first_half.a.value);
    resumed.b.value.copy_from(first_half.b.value);
    resumed.set_grads(2);
    after->step(resumed.list(), 1, ctx);
    EXPECT_EQ(resumed.a.value.to_vector(), straight.a.value.to_vector());
    EXPECT_EQ(resumed.b.value.to_vector(), straight.b.value.to_vector());
  }
}

TEST(SolverConfig, DefaultsAndCaffeNames) {
  using kernels::OptimizerType;
  auto config = [](const std::string& yaml) {
    return read_solver_config(parse_config(yaml, "s.yaml"), 100);
  };
  const SolverConfig adam = config("{type: adam, base_lr: 0.1}");
  EXPECT_EQ(adam.rule.type, OptimizerType::adam);
  EXPECT_EQ(adam.rule.beta1, 0.9);
  EXPECT_EQ(adam.rule.beta2, 0.999);
  EXPECT_EQ(adam.rule.eps, 1e-8);
  EXPECT_EQ(adam.weight_decay, 0.0);
  EXPECT_EQ(adam.iter_size, 1);
  EXPECT_EQ(adam.clip_gradients, 0.0);
  EXPECT_EQ(config("{type: AdamW, base_lr: 0.1}").weight_decay, 0.01);  // torch.optim.AdamW's
  EXPECT_EQ(config("{type: AdaGrad, base_lr: 0.1}").rule.eps, 1e-10);
  const SolverConfig caffe_adam =
      config("{type: Adam, base_lr: 0.1, momentum: 0.8, momentum2: 0.95, delta: 0.001}");
  EXPECT_EQ(caffe_adam.rule.beta1, 0.8);
  EXPECT_EQ(caffe_adam.rule.beta2, 0.95);
  EXPECT_EQ(caffe_adam.rule.eps, 0.001);
  const SolverConfig caffe_rmsprop =
      config("{type: RMSProp, base_lr: 0.1, rms_decay: 0.9, delta: 0.001}");
  EXPECT_EQ(caffe_rmsprop.rule.alpha, 0.9);
  EXPECT_EQ(caffe_rmsprop.rule.eps, 0.001);
  const SolverConfig nesterov = config("{type: Nesterov, base_lr: 0.1, momentum: 0.9}");
  EXPECT_EQ(nesterov.rule.type, OptimizerType::nesterov);
  EXPECT_EQ(config("{type: sgd, base_lr: 0.1, momentum: 0.9, nesterov: true}").type, "Nesterov");
  const SolverConfig accumulate = config("{base_lr: 0.1, iter_size: 4, clip_gradients: 35}");
  EXPECT_EQ(accumulate.iter_size, 4);
  EXPECT_EQ(accumulate.clip_gradients, 35.0);
}

TEST(SolverConfig, ErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{type: Adam, base_lr: 0.1, beta1: 1.0}",
       "s.yaml:1:35: solver.beta1 must be in [0, 1), got 1.0"},
      {"{type: Adam, base_lr: 0.1, beta2: -0.1}", "solver.beta2 must be in [0, 1)"},
      {"{type: Adam, base_lr: 0.1, momentum2: 1}", "solver.momentum2 must be in [0, 1)"},
      {"{type: Adam, base_lr: 0.1, eps: 0}", "solver.eps must be positive"},
      {"{type: AdaGrad, base_lr: 0.1, delta: -1}", "solver.delta must be positive"},
      {"{type: Adam, base_lr: 0}", "solver.base_lr must be positive"},
      {"{type: SGD, base_lr: 0.1, weight_decay: -0.1}", "solver.weight_decay must not be negative"},
      {"{type: SGD, base_lr: 0.1, momentum: 1}", "solver.momentum must be in [0, 1)"},
      {"{type: SGD, base_lr: 0.1, beta1: 0.9}", "solver.beta1 is not a key of solver type SGD"},
      {"{type: AdaGrad, base_lr: 0.1, centered: true}",
       "solver.centered is not a key of solver type AdaGrad"},
      {"{type: Adam, base_lr: 0.1, beta1: 0.9, momentum: 0.9}",
       "solver.momentum is Caffe's name for solver.beta1"},
      {"{type: SGD, base_lr: 0.1, nesterov: true}", "Nesterov momentum needs solver.momentum > 0"},
      {"{type: Nesterov, base_lr: 0.1}", "Nesterov momentum needs solver.momentum > 0"},
      {"{type: RMSProp, base_lr: 0.1, alpha: 1.5}", "solver.alpha must be in [0, 1)"},
      {"{type: AdaGrad, base_lr: 0.1, lr_decay: -1}", "solver.lr_decay must not be negative"},
      {"{type: AdaGrad, base_lr: 0.1, initial_accumulator_value: -1}",
       "solver.initial_accumulator_value must not be negative"},
      {"{type: SGD, base_lr: 0.1, iter_size: 0}", "solver.iter_size must be between 1"},
      {"{type: SGD, base_lr: 0.1, clip_gradients: -1}", "solver.clip_gradients must be positive"},
      {"{type: Adamm, base_lr: 0.1}",
       "unknown solver type 'Adamm' (known: SGD, Nesterov, Adam, AdamW, RMSProp, AdaGrad)"},
  };
  for (const auto& [yaml, message] : bad) {
    try {
      solver_from(yaml);
      ADD_FAILURE() << yaml << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  // A key no solver has is left to the caller's unknown-key check, which names it.
  const ConfigNode node = parse_config("{type: Adam, base_lr: 0.1, beta3: 0.5}", "s.yaml");
  make_solver(node, 100);
  try {
    node.check_no_unknown_keys("solver");
    ADD_FAILURE() << "beta3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("beta3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema
