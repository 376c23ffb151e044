#include "optim/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "kernels/optimizers/grad_unscale.h"

namespace crema {
namespace {

// A value that is a float > 0 (a scale, a factor); `name` is its key's path for the message.
float positive(const ConfigNode& value, const std::string& name) {
  const double v = value.as<double>();
  if (!(v > 0.0 && v <= double(std::numeric_limits<float>::max()))) {
    value.fail(name + " must be a number > 0 that float holds, got " + value.scalar());
  }
  return float(v);
}

float positive(const ConfigNode& map, const std::string& key, float fallback) {
  return map.has(key) ? positive(map.at(key), "solver.loss_scale." + key) : fallback;
}

bool looks_like_a_number(const std::string& text) {
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0';
}

}  // namespace

LossScaleConfig read_loss_scale_config(const ConfigNode& solver, Precision precision) {
  LossScaleConfig c;
  c.enabled = precision == Precision::fp16;
  if (!solver.has("loss_scale")) return c;
  const ConfigNode& node = solver.at("loss_scale");
  if (node.is_scalar() && !looks_like_a_number(node.scalar())) {
    c.enabled = node.as<bool>();  // true: dynamic with the defaults
    return c;
  }
  c.enabled = true;
  if (node.is_scalar()) {
    c.dynamic = false;
    c.init = positive(node, "solver.loss_scale");
    return c;
  }
  if (!node.is_map()) {
    node.fail(
        "solver.loss_scale is a map {init, growth_factor, backoff_factor, growth_interval}, a "
        "number (a fixed scale) or false");
  }
  c.init = positive(node, "init", c.init);
  c.growth_factor = positive(node, "growth_factor", c.growth_factor);
  if (!(c.growth_factor > 1.0f)) {
    node.at("growth_factor").fail("solver.loss_scale.growth_factor must be > 1");
  }
  c.backoff_factor = positive(node, "backoff_factor", c.backoff_factor);
  if (!(c.backoff_factor < 1.0f)) {
    node.at("backoff_factor").fail("solver.loss_scale.backoff_factor must be in (0, 1)");
  }
  c.growth_interval = node.get<int64_t>("growth_interval", c.growth_interval);
  if (c.growth_interval < 1) {
    node.at("growth_interval").fail("solver.loss_scale.growth_interval must be >= 1");
  }
  node.check_no_unknown_keys("solver.loss_scale");
  return c;
}

LossScaler::LossScaler(LossScaleConfig config) : config_(config) {
  state_.scale = config_.init;
}

bool LossScaler::unscale(const std::vector<Param*>& params, Context& ctx) {
  if (!found_inf_.defined() || found_inf_.device() != ctx.device()) found_inf_ = ctx.zeros({});
  ctx.fill(found_inf_, 0.0f);
  std::vector<Tensor*> grads;
  for (Param* p : params) {
    if (!p->frozen()) grads.push_back(&p->grad);
  }
  // 1 / S in double, rounded once: torch's scale.double().reciprocal().float().
  kernels::unscale_gradients(ctx, grads, float(1.0 / double(state_.scale)), found_inf_);
  return found_inf_.to_vector()[0] == 0.0f;
}

bool LossScaler::update(bool finite) {
  if (!finite) ++state_.skipped;
  if (!config_.dynamic) return false;
  if (!finite) {
    // Never below float's smallest normal number, so that 1 / S stays finite.
    state_.scale =
        std::max(state_.scale * config_.backoff_factor, std::numeric_limits<float>::min());
    state_.good_steps = 0;
    return true;
  }
  if (++state_.good_steps < config_.growth_interval) return false;
  state_.good_steps = 0;
  const float grown = state_.scale * config_.growth_factor;
  if (!std::isfinite(grown)) return false;
  state_.scale = grown;
  return true;
}

}  // namespace crema
