// Solver: turns parameter gradients into parameter updates.
//
// Each step, for every learnable parameter p that is not frozen (lr_mult 0: skipped, no state),
//   lr_p = lr(iter) * lr_mult,  weight_decay_p = weight_decay * decay_mult,
// the gradients are scaled (divided by iter_size, then clipped by their global norm when
// clip_gradients is set) and the solver's rule is applied to all parameters at once, in one fused
// kernel launch on a GPU, which also zeroes the gradients. Between steps gradients accumulate, so
// a training loop runs iter_size forward/backward passes and then calls step once.
//
// Rules (solver.type; the formulas are in kernels/optimizers/optimizers.h, the keys in
// optim/README.md): SGD (Caffe's momentum form; nesterov: true for PyTorch's Nesterov), Adam,
// AdamW, RMSProp, AdaGrad, each PyTorch's torch.optim update.
//
// The state a rule keeps per parameter (momentum, moments) lives in the solver, indexed by the
// parameter's position in the list given to step (which must therefore be the same list every
// step, as Net::learnable_params is), and is created, zeroed or at its initial value, at the
// first step or by state().
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"
#include "kernels/optimizers/optimizers.h"
#include "optim/lr_policy.h"

namespace crema {

// Everything a solver is configured with (read from the `solver:` node by read_solver_config).
struct SolverConfig {
  std::string type = "SGD";     // SGD, Nesterov, Adam, AdamW, RMSProp or AdaGrad (checkpoints)
  kernels::OptimizerRule rule;  // the update rule and its hyper-parameters
  double base_lr = 0.01;
  double weight_decay = 0.0;
  LrPolicy lr_policy;
  int iter_size = 1;            // forward/backward passes whose gradients one step uses
  double clip_gradients = 0.0;  // max global gradient norm; 0: no clipping
};

class Solver {
 public:
  explicit Solver(SolverConfig config) : config_(std::move(config)) {}

  // Applies one update with the learning rate for `iter` (Adam's bias correction and AdaGrad's
  // lr decay use the step t = iter + 1 - skipped_steps, so a resumed run continues exactly) and
  // zeroes the gradients of the updated parameters. `skipped_steps`: the iterations before this
  // one whose update a loss scaler skipped (optim/loss_scale.h); torch.optim counts t in applied
  // updates.
  void step(const std::vector<Param*>& params, int64_t iter, Context& ctx,
            int64_t skipped_steps = 0);
  double learning_rate(int64_t iter) const { return config_.lr_policy.rate(config_.base_lr, iter); }
  // Multiplies base_lr, and with it every later learning rate, by `factor` (a training run that
  // rolls back after a non-finite step lowers its learning rate so).
  void scale_learning_rate(double factor) { config_.base_lr *= factor; }
  // Forward/backward passes per step; step divides the accumulated gradients by it.
  int iter_size() const { return config_.iter_size; }
  const SolverConfig& config() const { return config_; }

  // The per-parameter optimizer state, named "<param>.<slot>" (conv1.weight.momentum_buffer,
  // fc1.weight.exp_avg, fc1.weight.exp_avg_sq, ...). Creates missing state (zeros, or the initial
  // accumulator) so a resumed run can copy saved values in before its first step. The tensors
  // share storage with the solver's own state.
  std::vector<std::pair<std::string, Tensor>> state(const std::vector<Param*>& params,
                                                    Context& ctx);

 private:
  using Slots = std::array<Tensor, kernels::kMaxOptimizerSlots>;
  // Parameter `index`'s state, created (or re-created for a new shape) on the context's device.
  Slots& slots_of(size_t index, const Param& param, Context& ctx);

  SolverConfig config_;
  std::vector<Slots> state_;  // by parameter position; a slot the rule does not use stays empty
};

// Reads and validates the `solver:` node: type, base_lr, weight_decay, lr_policy, iter_size,
// clip_gradients and the type's own keys. `total_iters` feeds poly/cosine policies. A key that
// belongs to another solver type, or a value out of range, is an error naming the key; other
// keys are left for the caller's check_no_unknown_keys (the training loop reads its own).
SolverConfig read_solver_config(const ConfigNode& solver, int64_t total_iters);
std::unique_ptr<Solver> make_solver(const ConfigNode& solver, int64_t total_iters);

}  // namespace crema
