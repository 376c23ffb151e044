// What BatchNorm (layers/batch_norm.cpp) and the fused BatchNormReLU (layers/batch_norm_relu.cpp)
// share: their YAML keys, read once, the copy of x they keep when running in place, the dtype of
// their saved statistics and the dtypes and layouts they run.
#pragma once

#include <string>

#include "core/context.h"
#include "core/layer.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"

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

// In place the top's storage is x's, which forward overwrites with y: backward reads x from a
// copy, sized here in x's dtype and layout; out of place the top takes x's shape.
inline void reshape_top_or_input_copy(const Blob& bottom, Blob& top, Tensor& input_copy,
                                      Context& ctx) {
  const Tensor& x = bottom.value;
  if (&top != &bottom) {
    top.value.reshape(x.shape());
    return;
  }
  if (!input_copy.defined()) {
    input_copy = ctx.empty(x.shape(), x.dtype());
  } else {
    input_copy.reshape(x.shape());
  }
  input_copy.set_layout(x.layout());
}

// The dtype of the saved statistics beside x: f64 beside f64 (gradient checks), else f32 (the
// kernels keep statistics in fp32 beside bf16 and f16 activations).
inline DType statistics_dtype(const Tensor& x) {
  return x.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

// BatchNorm and BatchNormReLU (spatial): both layouts, and bf16 and f16 on CUDA
// (kernels/batch_norm); per activation nchw in f32 and f64 only.
inline bool batch_norm_runs(DType dtype, Layout layout, const Device& device, bool per_activation) {
  if (per_activation) return kernels_run(dtype, device, false) && layout == Layout::nchw;
  return kernels_run(dtype, device, true);
}

}  // namespace crema
