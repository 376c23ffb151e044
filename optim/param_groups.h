// Parameter groups: learning-rate and weight-decay multipliers chosen by parameter name, the way a
// fine-tuning run slows or freezes a pretrained backbone and trains a new head at full rate.
//
//   solver:
//     param_groups:
//       - {match: "layer4\\..*|fc\\..*", lr_mult: 1}    # the last stage and the head
//       - {match: ".*", lr_mult: 0.1, decay_mult: 1}   # everything else, ten times slower
//
// Each parameter name ("layer4.0.conv1.weight", "fc.bias") is matched against the groups in order
// with std::regex_match (the whole name must match, ECMAScript syntax); the first group that
// matches decides, and a parameter no group matches keeps its multipliers. The group's lr_mult and
// decay_mult (default 1) multiply what the layer's own `param:` gave the parameter (1 unless the
// layer says otherwise, e.g. `param: {bias: {lr_mult: 2}}`), so lr = base_lr * layer's lr_mult *
// group's lr_mult. An lr_mult of 0 freezes: no update, no solver state, and no gradient computed
// (the net decides again which layers run backward), as `param: {weight: {lr_mult: 0}}` does.
// A group that matches no parameter is an error at its `match:`, since it is almost always a typo.
//
// Batch norm frozen in eval mode, the usual way to fine-tune a pretrained CNN on small batches:
//   solver.freeze_batch_norm: true     every BatchNorm normalizes with its running statistics and
//                                      leaves them alone (use_global_stats: true in training too),
//                                      and its weight and bias are frozen (lr_mult 0):
//                                      torchvision's FrozenBatchNorm2d, or model.eval() on the BN
//                                      modules plus requires_grad_(False)
//   solver.freeze_batch_norm: stats    the statistics only; weight and bias still train
//   solver.freeze_batch_norm: false    (default) batch statistics in training, as usual
// The same by hand, per layer: `use_global_stats: true` and `param: {weight: {lr_mult: 0},
// bias: {lr_mult: 0}}` on a BatchNorm. The statistics half is a config rewrite made when the
// config is loaded (batch_norm_overrides); the affine half is applied with the groups, before them
// (a frozen weight stays frozen whatever its group).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/net.h"

namespace crema {

// Applies solver.param_groups (when present) to every parameter of `net`, then has the net decide
// again which layers run backward. Errors name the group's file:line:col.
// Then, with solver.freeze_batch_norm: true, freezes every BatchNorm's weight and bias.
void apply_param_groups(const ConfigNode& solver, Net& net);

// The overrides that solver.freeze_batch_norm (true or stats) implies:
// "++model.layers.<index>.use_global_stats=true" for every BatchNorm of `root`'s model; none
// without it. A value other than true, false or stats is an error at the key.
std::vector<std::string> batch_norm_overrides(const ConfigNode& root);

// The net's learnable values (each shared parameter once), trainable and frozen (lr_mult 0), for
// the training header and `crema summary`.
struct ParameterCounts {
  int64_t trainable = 0;
  int64_t frozen = 0;
};
ParameterCounts count_parameters(const Net& net);

}  // namespace crema
