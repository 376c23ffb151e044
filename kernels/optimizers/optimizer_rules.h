// The update rules of optimizers.h as one element's arithmetic, shared by the CPU path and the
// CUDA kernels (included by optimizers_cpu.cpp and optimizers_cuda.cu only), so that both run the
// same float operations in the same order. The constants are derived on the host, in double, and
// rounded once: per rule (rule_constants) and per parameter (param_constants).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/optimizers/optimizers.h"

namespace crema::kernels::rules {

// A rule as types: the rule, and which state slots it uses (SGD's momentum buffer, RMSProp's
// momentum buffer and grad_avg depend on their options). Loops are instantiated per rule, so an
// unused slot costs nothing and no pointer is tested per element.
template <OptimizerType kType, bool kSlot0, bool kSlot1, bool kSlot2>
struct Rule {
  static constexpr OptimizerType type = kType;
  static constexpr bool slot0 = kSlot0;
  static constexpr bool slot1 = kSlot1;
  static constexpr bool slot2 = kSlot2;
};

// Calls f(Rule<...>{}) for the rule's type and options.
template <class F>
void with_rule(const OptimizerRule& rule, F&& f) {
  using T = OptimizerType;
  switch (rule.type) {
    case T::sgd:
      rule.momentum > 0 ? f(Rule<T::sgd, true, false, false>{})
                        : f(Rule<T::sgd, false, false, false>{});
      return;
    case T::nesterov:
      f(Rule<T::nesterov, true, false, false>{});
      return;
    case T::adam:
      f(Rule<T::adam, true, true, false>{});
      return;
    case T::adamw:
      f(Rule<T::adamw, true, true, false>{});
      return;
    case T::adagrad:
      f(Rule<T::adagrad, true, false, false>{});
      return;
    case T::rmsprop:
      if (rule.momentum > 0) {
        rule.centered ? f(Rule<T::rmsprop, true, true, true>{})
                      : f(Rule<T::rmsprop, true, true, false>{});
      } else {
        rule.centered ? f(Rule<T::rmsprop, true, false, true>{})
                      : f(Rule<T::rmsprop, true, false, false>{});
      }
      return;
  }
}

// The constants every parameter shares in one step.
struct RuleConstants {
  float momentum;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float alpha, one_minus_alpha;
  float eps;
};

inline RuleConstants rule_constants(const OptimizerRule& rule, int64_t step) {
  return {float(rule.momentum),    float(rule.beta1),
          float(1.0 - rule.beta1), float(rule.beta2),
          float(1.0 - rule.beta2), float(sqrt(1.0 - pow(rule.beta2, double(step)))),
          float(rule.alpha),       float(1.0 - rule.alpha),
          float(rule.eps)};
}

// One parameter's constants in one step: the step size the rule multiplies by (lr; Adam's
// lr / (1 - beta1^t); AdaGrad's lr / (1 + (t - 1) lr_decay)), the L2 coefficient added to the
// gradient (0 for AdamW) and AdamW's decay factor 1 - lr wd.
struct ParamConstants {
  float lr;
  float weight_decay;
  float decay_factor;
};

inline ParamConstants param_constants(const OptimizerRule& rule, int64_t step, float lr,
                                      float weight_decay) {
  const double t = double(step);
  switch (rule.type) {
    case OptimizerType::adam:
      return {float(double(lr) / (1.0 - pow(rule.beta1, t))), weight_decay, 1.0f};
    case OptimizerType::adamw:
      return {float(double(lr) / (1.0 - pow(rule.beta1, t))), 0.0f,
              float(1.0 - double(lr) * double(weight_decay))};
    case OptimizerType::adagrad:
      return {float(double(lr) / (1.0 + (t - 1.0) * rule.lr_decay)), weight_decay, 1.0f};
    default:
      return {lr, weight_decay, 1.0f};
  }
}

// The gradient factor s of optimizers.h from the sum of squares of the unscaled gradients.
// A NaN norm gives a NaN factor, as torch.clamp(NaN, max=1) does.
CREMA_HOST_DEVICE inline float gradient_scale(double sum_of_squares, float multiplier,
                                              float max_norm) {
  if (!(max_norm > 0.0f)) return multiplier;
  const double norm = sqrt(sum_of_squares) * double(multiplier);
  const double coefficient = double(max_norm) / (norm + 1e-6);
  return float(double(multiplier) * (coefficient > 1.0 ? 1.0 : coefficient));
}

// One element: g the scaled gradient, w the parameter, s0..s2 the state slots (unused ones are
// dummies). The formulas of optimizers.h, in the order PyTorch evaluates them.
template <class R>
CREMA_HOST_DEVICE inline void update_element(const RuleConstants& r, const ParamConstants& p,
                                             float g, float& w, float& s0, float& s1, float& s2) {
  using T = OptimizerType;
  if constexpr (R::type == T::sgd) {
    const float step = p.lr * (g + p.weight_decay * w);
    if constexpr (R::slot0) {  // momentum
      s0 = r.momentum * s0 + step;
      w -= s0;
    } else {
      w -= step;
    }
  } else if constexpr (R::type == T::nesterov) {
    const float d = g + p.weight_decay * w;
    s0 = r.momentum * s0 + d;
    w -= p.lr * (d + r.momentum * s0);
  } else if constexpr (R::type == T::adam || R::type == T::adamw) {
    float d = g;
    if constexpr (R::type == T::adamw) {
      w *= p.decay_factor;
    } else {
      d += p.weight_decay * w;
    }
    s0 = r.beta1 * s0 + r.one_minus_beta1 * d;
    s1 = r.beta2 * s1 + r.one_minus_beta2 * d * d;
    const float denominator = sqrtf(s1) / r.bias_correction2_sqrt + r.eps;
    w -= p.lr * (s0 / denominator);
  } else if constexpr (R::type == T::rmsprop) {
    const float d = g + p.weight_decay * w;
    s0 = r.alpha * s0 + r.one_minus_alpha * d * d;
    float avg;
    if constexpr (R::slot2) {  // centered: the variance instead of the raw second moment
      s2 = r.alpha * s2 + r.one_minus_alpha * d;
      avg = sqrtf(s0 - s2 * s2) + r.eps;
    } else {
      avg = sqrtf(s0) + r.eps;
    }
    if constexpr (R::slot1) {  // momentum
      s1 = r.momentum * s1 + d / avg;
      w -= p.lr * s1;
    } else {
      w -= p.lr * (d / avg);
    }
  } else {
    static_assert(R::type == T::adagrad);
    const float d = g + p.weight_decay * w;
    s0 += d * d;
    w -= p.lr * (d / (sqrtf(s0) + r.eps));
  }
}

}  // namespace crema::kernels::rules
