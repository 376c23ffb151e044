// Dynamic loss scaling for fp16 training: torch.amp's GradScaler, step for step.
//
// fp16 keeps 5 exponent bits: gradients below 2^-24 round to zero and the small ones lose their
// mantissa. Multiplying the loss by a scale S before backward multiplies every gradient by S,
// lifting them into fp16's range; the parameter gradients (fp32) are divided by S before the
// solver sees them, so the update is the one an unscaled step would make. Too large an S
// overflows: some gradient becomes inf or NaN. GradScaler's answer, and this one's:
//
//   seed    the loss tops' gradient is loss_weight * S instead of loss_weight (Net::set_loss_scale)
//   unscale after backward (and, on several GPUs, after the gradients are averaged, so that every
//           rank sees the same values and decides alike): g = g / S for every parameter gradient,
//           in one pass that also finds any inf or NaN (kernels/optimizers/grad_unscale.h)
//   decide  a non-finite gradient: the step is skipped (no update, no change to the solver's
//           state), S = S * backoff_factor and the good-step count restarts at 0;
//           all finite: the step is applied and counted; after growth_interval good steps in a
//           row S = S * growth_factor (if that stays finite) and the count restarts at 0
//
// Defaults are GradScaler's: S starts at 2^16, growth 2, backoff 0.5, growth interval 2000; with
// these S stays a power of two, so scaling and unscaling are exact. A fixed scale (`loss_scale: N`)
// never grows or backs off, but an overflowed step is still skipped.
//
// Config (under solver:):
//   loss_scale: {init: 65536, growth_factor: 2, backoff_factor: 0.5, growth_interval: 2000}
//                        dynamic, any key may be left out; the default with model.precision: fp16
//   loss_scale: 1024     a fixed scale
//   loss_scale: true     dynamic with the defaults (in any precision)
//   loss_scale: false    none (fp16 without scaling: small gradients flush to zero)
// With model.precision fp32, tf32 or bf16 there is no scaling unless loss_scale is given (bf16
// has fp32's exponent range and needs none; an explicit one is allowed and harmless).
//
// The state (S, the good steps in a row, the steps skipped so far) is part of a checkpoint
// (state.json's loss_scale), so a resumed run continues with the same scale.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"
#include "core/precision.h"

namespace crema {

struct LossScaleConfig {
  bool enabled = false;
  bool dynamic = true;  // false: a fixed scale
  float init = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

// What a checkpoint keeps of a scaler.
struct LossScaleState {
  float scale = 65536.0f;
  int64_t good_steps = 0;  // finite steps in a row since the scale last changed
  int64_t skipped = 0;     // steps skipped for overflow since the run began
};

// Reads solver.loss_scale as above for a net of `precision` (model.precision:
// core/net_precision.h's read_net_precision). Values out of range are an error
// naming the key: init finite and > 0, growth_factor > 1, backoff_factor in (0, 1),
// growth_interval >= 1.
LossScaleConfig read_loss_scale_config(const ConfigNode& solver, Precision precision);

class LossScaler {
 public:
  explicit LossScaler(LossScaleConfig config = {});
  bool enabled() const { return config_.enabled; }
  const LossScaleConfig& config() const { return config_; }
  // The scale the next backward's loss gradient is multiplied by (1 when disabled).
  float scale() const { return config_.enabled ? state_.scale : 1.0f; }

  // Divides the gradients of the parameters that are not frozen by the scale and reports whether
  // every one is finite (reads one device scalar back: a synchronization on a GPU).
  bool unscale(const std::vector<Param*>& params, Context& ctx);
  // The decision of the top of this file, after a step whose gradients were `finite`. Returns
  // whether the scale changed.
  bool update(bool finite);

  const LossScaleState& state() const { return state_; }
  void set_state(const LossScaleState& state) { state_ = state; }

 private:
  LossScaleConfig config_;
  LossScaleState state_;
  Tensor found_inf_;  // a device scalar, created at the first unscale
};

}  // namespace crema
