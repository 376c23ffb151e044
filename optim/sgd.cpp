#include "optim/sgd.h"

#include "kernels/sgd/sgd.h"

namespace crema {

void SgdSolver::update(const std::vector<ParamUpdate>& updates, Context& ctx) {
  for (const ParamUpdate& u : updates) {
    if (velocity_.size() <= u.index) velocity_.resize(u.index + 1);  // before taking addresses
  }
  std::vector<kernels::SgdTensorSet> sets;
  sets.reserve(updates.size());
  for (const ParamUpdate& u : updates) {
    Tensor& v = velocity_[u.index];
    if (!v.defined() || v.shape() != u.param->value.shape()) v = ctx.zeros(u.param->value.shape());
    sets.push_back({&u.param->value, &u.param->grad, &v, u.lr, u.weight_decay});
  }
  kernels::sgd_momentum_update_multi(ctx, sets, float(momentum_));
}

}  // namespace crema
