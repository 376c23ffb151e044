// Stochastic gradient descent with momentum, Caffe's form:
//   v = momentum * v + lr * (g + weight_decay * w);   w = w - v
// With a fixed learning rate this equals PyTorch's SGD (v' = m v' + g_wd; w -= lr v', v = lr v').
// When the rate changes, Caffe's v carries the old rate for a while; PyTorch's rescales at once.
// The update is one fused kernel (kernels/sgd) for all parameters: one pass over w, g and v that
// also zeroes g.
#pragma once

#include <vector>

#include "optim/solver.h"

namespace crema {

class SgdSolver final : public Solver {
 public:
  SgdSolver(double base_lr, double weight_decay, LrPolicy policy, double momentum)
      : Solver(base_lr, weight_decay, std::move(policy)), momentum_(momentum) {}

 protected:
  void update(const std::vector<ParamUpdate>& updates, Context& ctx) override;

 private:
  double momentum_;
  std::vector<Tensor> velocity_;  // one per parameter, zero at the start
};

}  // namespace crema
