// The YAML keys of BatchNorm, read once for the two layers that normalize with them: BatchNorm
// (layers/batch_norm.cpp) and the fused BatchNormReLU (layers/batch_norm_relu.cpp).
#pragma once

#include <string>

#include "layers/key_error.h"

namespace crema {

struct BatchNormKeys {
  float eps = 1e-5f;
  float momentum = 0.1f;        // PyTorch's convention: the weight of the new batch
  bool per_activation = false;  // mode: per_activation (else spatial)
  bool affine = true;
  bool use_global_stats = false;  // default: true in the test phase
};

inline BatchNormKeys read_batch_norm_keys(const LayerSpec& spec) {
  const ConfigNode& node = *spec.node;
  BatchNormKeys k;
  k.eps = node.get<float>("eps", 1e-5f);
  if (!(k.eps >= 0.0f))
    fail_at_key(spec, "eps", "must not be negative, got " + std::to_string(k.eps));
  k.momentum = node.get<float>("momentum", 0.1f);
  if (!(k.momentum >= 0.0f && k.momentum <= 1.0f)) {
    fail_at_key(spec, "momentum", "must be in [0, 1], got " + std::to_string(k.momentum));
  }
  const std::string mode = node.get<std::string>("mode", "spatial");
  if (mode != "spatial" && mode != "per_activation") {
    fail_at_key(spec, "mode", "must be spatial or per_activation, got '" + mode + "'");
  }
  k.per_activation = mode == "per_activation";
  k.affine = node.get<bool>("affine", true);
  k.use_global_stats = node.get<bool>("use_global_stats", spec.phase == Phase::test);
  return k;
}

}  // namespace crema
