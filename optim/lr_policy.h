// Learning-rate policies: lr(iter) from base_lr, as Caffe defines them, plus cosine and a linear
// warm-up that any policy can be wrapped in.
//
//   fixed      base_lr
//   step       base_lr * gamma ^ floor(iter / step_size)
//   multistep  base_lr * gamma ^ (number of entries of `steps` <= iter)
//   exp        base_lr * gamma ^ iter
//   inv        base_lr * (1 + gamma * iter) ^ (-power)
//   poly       base_lr * (1 - iter / max_iter) ^ power
//   cosine     min_lr + (base_lr - min_lr) * (1 + cos(pi * iter / max_iter)) / 2
//   warmup     (any policy) for iter < warmup_iters the rate is scaled by
//              warmup_start + (1 - warmup_start) * iter / warmup_iters
//
// YAML: solver.lr_policy: {type: inv, gamma: 0.0001, power: 0.75, warmup_iters: 0,
// warmup_start: 0}. poly and cosine run over the solver's total iterations unless the policy sets
// its own max_iter.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace crema {

struct LrPolicy {
  std::string type = "fixed";
  double gamma = 0.1;
  double power = 1.0;
  int64_t step_size = 0;
  std::vector<int64_t> steps;
  int64_t max_iter = 0;
  double min_lr = 0.0;
  int64_t warmup_iters = 0;
  double warmup_start = 0.0;

  double rate(double base_lr, int64_t iter) const;
};

// Reads solver.lr_policy (absent: fixed). `total_iters` is the run's length, used by poly and
// cosine when the policy gives no max_iter.
LrPolicy read_lr_policy(const ConfigNode& solver, int64_t total_iters);

}  // namespace crema
