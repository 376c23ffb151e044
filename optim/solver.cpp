#include "optim/solver.h"

namespace crema {

Solver::Slots& Solver::slots_of(size_t index, const Param& param, Context& ctx) {
  if (state_.size() <= index) state_.resize(index + 1);
  Slots& slots = state_[index];
  for (int j = 0; j < kernels::kMaxOptimizerSlots; ++j) {
    if (kernels::optimizer_slot_name(config_.rule, j).empty()) continue;
    Tensor& t = slots[size_t(j)];
    if (t.defined() && t.shape() == param.value.shape() && t.device() == ctx.device()) continue;
    t = ctx.empty(param.value.shape());
    ctx.fill(t, kernels::optimizer_slot_initial_value(config_.rule, j));
  }
  return slots;
}

void Solver::step(const std::vector<Param*>& params, int64_t iter, Context& ctx,
                  int64_t skipped_steps) {
  const double lr = learning_rate(iter);
  if (state_.size() < params.size()) state_.resize(params.size());  // before taking addresses
  std::vector<kernels::OptimizerTensorSet> sets;
  sets.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = *params[i];
    if (p.frozen()) continue;
    Slots& slots = slots_of(i, p, ctx);
    kernels::OptimizerTensorSet set{
        &p.value, &p.grad, {}, float(lr * p.lr_mult), float(config_.weight_decay * p.decay_mult)};
    for (size_t j = 0; j < slots.size(); ++j) {
      if (slots[j].defined()) set.state[j] = &slots[j];
    }
    sets.push_back(set);
  }
  const kernels::GradientScaling scaling{float(1.0 / config_.iter_size),
                                         float(config_.clip_gradients)};
  kernels::optimizer_update(ctx, config_.rule, iter + 1 - skipped_steps, sets, scaling);
}

std::vector<std::pair<std::string, Tensor>> Solver::state(const std::vector<Param*>& params,
                                                          Context& ctx) {
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    if (p.frozen()) continue;
    const Slots& slots = slots_of(i, p, ctx);
    for (int j = 0; j < kernels::kMaxOptimizerSlots; ++j) {
      const std::string slot = kernels::optimizer_slot_name(config_.rule, j);
      if (!slot.empty()) named.emplace_back(p.name + "." + slot, slots[size_t(j)]);
    }
  }
  return named;
}

}  // namespace crema
