#include "optim/sgd.h"

#include "kernels/sgd/sgd.h"

namespace crema {

void SgdSolver::update(Param& param, size_t index, float lr, float weight_decay, Context& ctx) {
  if (velocity_.size() <= index) velocity_.resize(index + 1);
  Tensor& v = velocity_[index];
  if (!v.defined() || v.shape() != param.value.shape()) v = ctx.zeros(param.value.shape());
  kernels::sgd_momentum_update(ctx, param.value, param.grad, v, lr, float(momentum_), weight_decay);
}

}  // namespace crema
