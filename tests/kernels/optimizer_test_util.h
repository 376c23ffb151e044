// Helpers shared by the optimizer kernel tests (CPU and CUDA): every rule variant the kernels
// instantiate, random parameters with valid state, and the double-precision reference of one
// multi-parameter step (gradient scaling, then each parameter's rule).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "kernels/optimizers/optimizers.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::testing {

inline OptimizerRule make_rule(OptimizerType type, double momentum = 0.0, bool centered = false) {
  OptimizerRule rule;
  rule.type = type;
  rule.momentum = momentum;
  rule.centered = centered;
  rule.beta1 = 0.8;
  rule.beta2 = 0.95;
  rule.alpha = 0.9;
  rule.eps = 1e-6;
  rule.lr_decay = 0.05;
  rule.initial_accumulator_value = 0.1;
  return rule;
}

// Every instantiation of the update loops, with a name for messages.
inline std::vector<std::pair<std::string, OptimizerRule>> rules_under_test() {
  using T = OptimizerType;
  return {{"sgd", make_rule(T::sgd)},
          {"sgd momentum", make_rule(T::sgd, 0.9)},
          {"nesterov", make_rule(T::nesterov, 0.9)},
          {"adam", make_rule(T::adam)},
          {"adamw", make_rule(T::adamw)},
          {"rmsprop", make_rule(T::rmsprop)},
          {"rmsprop momentum", make_rule(T::rmsprop, 0.5)},
          {"rmsprop centered", make_rule(T::rmsprop, 0.0, true)},
          {"rmsprop centered momentum", make_rule(T::rmsprop, 0.5, true)},
          {"adagrad", make_rule(T::adagrad)}};
}

// One parameter on the host: value, gradient, the rule's state (unused slots undefined) and its
// effective lr and weight decay.
struct HostParam {
  Tensor w, g;
  std::array<Tensor, kMaxOptimizerSlots> state;
  float lr = 0.0f, weight_decay = 0.0f;
  HostParam clone() const {
    HostParam c = *this;
    c.w = w.clone();
    c.g = g.clone();
    for (Tensor& t : c.state) t = t.defined() ? t.clone() : t;
    return c;
  }
};

// State values a rule can meet: second moments positive, a centered average small enough that
// the variance sq - ga^2 stays positive.
inline Tensor random_state(Random& rng, const std::string& slot, int64_t n) {
  if (slot == "exp_avg_sq" || slot == "sum") return random_tensor(rng, {n}, 0.01, 1.0);
  if (slot == "square_avg") return random_tensor(rng, {n}, 0.5, 1.0);
  if (slot == "grad_avg") return random_tensor(rng, {n}, -0.1, 0.1);
  return random_tensor(rng, {n});
}

inline std::vector<HostParam> random_params(Random& rng, const OptimizerRule& rule,
                                            const std::vector<int64_t>& sizes) {
  std::vector<HostParam> params;
  for (size_t k = 0; k < sizes.size(); ++k) {
    HostParam p;
    p.w = random_tensor(rng, {sizes[k]});
    p.g = random_tensor(rng, {sizes[k]});
    for (int j = 0; j < kMaxOptimizerSlots; ++j) {
      const std::string slot = optimizer_slot_name(rule, j);
      if (!slot.empty()) p.state[size_t(j)] = random_state(rng, slot, sizes[k]);
    }
    p.lr = 0.01f * float(k % 5 + 1);
    p.weight_decay = k % 3 == 0 ? 0.0f : 0.01f;
    params.push_back(std::move(p));
  }
  return params;
}

inline std::vector<OptimizerSlice> host_slices(std::vector<HostParam>& params) {
  std::vector<OptimizerSlice> slices;
  for (HostParam& p : params) {
    OptimizerSlice s{p.w.data<float>(), p.g.data<float>(), {}, p.w.numel(), p.lr, p.weight_decay};
    for (size_t j = 0; j < p.state.size(); ++j) {
      if (p.state[j].defined()) s.state[j] = p.state[j].data<float>();
    }
    slices.push_back(s);
  }
  return slices;
}

// A parameter's values in double after the reference step.
struct Expected {
  std::vector<double> w;
  std::array<std::vector<double>, kMaxOptimizerSlots> state;
};

// ref:: in double: the gradient factor over all parameters, then each parameter's rule.
inline std::vector<Expected> reference_step(const OptimizerRule& rule, int64_t step,
                                            GradientScaling scaling,
                                            const std::vector<HostParam>& params) {
  double squares = 0.0;
  for (const HostParam& p : params) {
    for (float x : p.g.to_vector()) squares += double(x) * double(x);
  }
  const double scale =
      ref::gradient_scale(squares, double(scaling.multiplier), double(scaling.max_norm));
  std::vector<Expected> out;
  for (const HostParam& p : params) {
    Expected e;
    e.w = to_double(p.w);
    std::vector<double> g = to_double(p.g);
    for (double& x : g) x *= scale;
    for (size_t j = 0; j < p.state.size(); ++j) {
      if (p.state[j].defined()) e.state[j] = to_double(p.state[j]);
    }
    const int64_t n = p.w.numel();
    const double lr = p.lr, wd = p.weight_decay;
    double* s0 = e.state[0].empty() ? nullptr : e.state[0].data();
    double* s1 = e.state[1].empty() ? nullptr : e.state[1].data();
    double* s2 = e.state[2].empty() ? nullptr : e.state[2].data();
    std::vector<double> unused(size_t(n), 0.0);  // SGD's history when it has no momentum
    switch (rule.type) {
      case OptimizerType::sgd:
        ref::sgd_update(n, e.w.data(), g.data(), s0 ? s0 : unused.data(), lr, rule.momentum, wd);
        break;
      case OptimizerType::nesterov:
        ref::nesterov_update(n, e.w.data(), g.data(), s0, lr, rule.momentum, wd);
        break;
      case OptimizerType::adam:
      case OptimizerType::adamw:
        ref::adam_update(n, e.w.data(), g.data(), s0, s1, lr, rule.beta1, rule.beta2, rule.eps, wd,
                         rule.type == OptimizerType::adamw, step);
        break;
      case OptimizerType::rmsprop:
        ref::rmsprop_update(n, e.w.data(), g.data(), s0, s1, s2, lr, rule.alpha, rule.eps,
                            rule.momentum, rule.centered, wd);
        break;
      case OptimizerType::adagrad:
        ref::adagrad_update(n, e.w.data(), g.data(), s0, lr, rule.lr_decay, rule.eps, wd, step);
        break;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace crema::kernels::testing
