// Solver: turns parameter gradients into parameter updates.
//
// Each step: for every learnable parameter p with multipliers (lr_mult, decay_mult),
//   lr_p = lr(iter) * lr_mult,  weight_decay_p = weight_decay * decay_mult,
// the solver's update rule is applied to all parameters at once (one fused kernel launch where
// the rule allows) and the gradients are zeroed in the same pass (gradients accumulate in
// between, so several forward/backward passes per step sum theirs).
//
// Solvers are chosen by solver.type; make_solver lists the known ones. To add one, see
// optim/README.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"
#include "optim/lr_policy.h"

namespace crema {

class Solver {
 public:
  virtual ~Solver() = default;
  // Applies one update with the learning rate for `iter` and zeroes the gradients.
  void step(const std::vector<Param*>& params, int64_t iter, Context& ctx);
  double learning_rate(int64_t iter) const { return policy_.rate(base_lr_, iter); }

 protected:
  Solver(double base_lr, double weight_decay, LrPolicy policy)
      : base_lr_(base_lr), weight_decay_(weight_decay), policy_(std::move(policy)) {}
  // One parameter's share of a step: its position (which identifies its optimizer state, such
  // as momentum) and its effective rate and decay.
  struct ParamUpdate {
    Param* param;
    size_t index;
    float lr;
    float weight_decay;
  };
  // Updates every parameter and zeroes its gradient.
  virtual void update(const std::vector<ParamUpdate>& updates, Context& ctx) = 0;

 private:
  double base_lr_;
  double weight_decay_;
  LrPolicy policy_;
};

// Builds the solver from the `solver:` node. `total_iters` feeds poly/cosine policies.
// Reads: type, base_lr, weight_decay, lr_policy and the type's own keys.
std::unique_ptr<Solver> make_solver(const ConfigNode& solver, int64_t total_iters);

}  // namespace crema
