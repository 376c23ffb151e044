#include "optim/solver.h"

#include "optim/sgd.h"

namespace crema {

void Solver::step(const std::vector<Param*>& params, int64_t iter, Context& ctx) {
  const double lr = learning_rate(iter);
  std::vector<ParamUpdate> updates;
  updates.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Param* p = params[i];
    updates.push_back({p, i, float(lr * p->lr_mult), float(weight_decay_ * p->decay_mult)});
  }
  update(updates, ctx);
}

std::unique_ptr<Solver> make_solver(const ConfigNode& solver, int64_t total_iters) {
  const std::string type = solver.get<std::string>("type", "sgd");
  const double base_lr = solver.get<double>("base_lr");
  if (!(base_lr > 0)) solver.at("base_lr").fail("solver.base_lr must be positive");
  const double weight_decay = solver.get<double>("weight_decay", 0.0);
  if (weight_decay < 0) solver.at("weight_decay").fail("solver.weight_decay must not be negative");
  LrPolicy policy = read_lr_policy(solver, total_iters);
  if (type == "sgd") {
    const double momentum = solver.get<double>("momentum", 0.0);
    if (momentum < 0 || momentum >= 1) solver.at("momentum").fail("solver.momentum must be in [0, 1)");
    return std::make_unique<SgdSolver>(base_lr, weight_decay, std::move(policy), momentum);
  }
  solver.at("type").fail("unknown solver type '" + type + "' (known: sgd)");
}

}  // namespace crema
