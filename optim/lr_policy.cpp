#include "optim/lr_policy.h"

#include <algorithm>
#include <cmath>

namespace crema {

double LrPolicy::rate(double base_lr, int64_t iter) const {
  double lr = base_lr;
  const double it = double(iter);
  if (type == "step") {
    lr = base_lr * std::pow(gamma, std::floor(it / double(step_size)));
  } else if (type == "multistep") {
    const auto passed = std::count_if(steps.begin(), steps.end(), [&](int64_t s) { return s <= iter; });
    lr = base_lr * std::pow(gamma, double(passed));
  } else if (type == "exp") {
    lr = base_lr * std::pow(gamma, it);
  } else if (type == "inv") {
    lr = base_lr * std::pow(1.0 + gamma * it, -power);
  } else if (type == "poly") {
    lr = base_lr * std::pow(std::max(0.0, 1.0 - it / double(max_iter)), power);
  } else if (type == "cosine") {
    const double t = std::min(1.0, it / double(max_iter));
    lr = min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (iter < warmup_iters) lr *= warmup_start + (1.0 - warmup_start) * it / double(warmup_iters);
  return lr;
}

LrPolicy read_lr_policy(const ConfigNode& solver, int64_t total_iters) {
  LrPolicy p;
  if (!solver.has("lr_policy")) return p;
  const ConfigNode& node = solver.at("lr_policy");
  p.type = node.get<std::string>("type");
  auto positive = [&](const char* key, double value) {
    if (!(value > 0)) node.at(key).fail(std::string("lr_policy.") + key + " must be positive");
  };
  if (p.type == "fixed") {
  } else if (p.type == "step") {
    p.gamma = node.get<double>("gamma");
    p.step_size = node.get<int64_t>("step_size");
    positive("step_size", double(p.step_size));
  } else if (p.type == "multistep") {
    p.gamma = node.get<double>("gamma");
    p.steps = node.get_list<int64_t>("steps");
    if (!std::is_sorted(p.steps.begin(), p.steps.end())) node.at("steps").fail("lr_policy.steps must increase");
  } else if (p.type == "exp") {
    p.gamma = node.get<double>("gamma");
  } else if (p.type == "inv") {
    p.gamma = node.get<double>("gamma");
    p.power = node.get<double>("power");
  } else if (p.type == "poly" || p.type == "cosine") {
    if (p.type == "poly") p.power = node.get<double>("power", 1.0);
    if (p.type == "cosine") p.min_lr = node.get<double>("min_lr", 0.0);
    p.max_iter = node.get<int64_t>("max_iter", total_iters);
    positive("max_iter", double(p.max_iter));
  } else {
    node.at("type").fail("unknown lr_policy type '" + p.type +
                         "' (known: fixed, step, multistep, exp, inv, poly, cosine)");
  }
  p.warmup_iters = node.get<int64_t>("warmup_iters", 0);
  p.warmup_start = node.get<double>("warmup_start", 0.0);
  if (p.warmup_iters < 0) node.at("warmup_iters").fail("warmup_iters must not be negative");
  node.check_no_unknown_keys("lr_policy (" + p.type + ")");
  return p;
}

}  // namespace crema
