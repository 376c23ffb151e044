// What Layer::runs (core/layer.h) answers for the layers whose kernels are templated on the
// storage type: which dtypes their kernels serve on a device. The layout is each layer's own
// answer: an elementwise layer (ReLU, the activations, Eltwise, Dropout, Split) runs either,
// since memory order does not change an elementwise map; a layer with per-channel or spatial
// work runs nhwc where its kernels have that form (BatchNorm, Pooling, Concat).
#pragma once

#include "core/device.h"
#include "core/tensor.h"

namespace crema {

// f32 and f64 (the references') on the CPU; f32 on CUDA, and bf16 and f16 there too when
// `half_on_cuda` (the layer's every CUDA kernel has a bf16/f16 instantiation).
inline bool kernels_run(DType dtype, const Device& device, bool half_on_cuda) {
  if (device.is_cuda()) {
    return dtype == DType::f32 || (half_on_cuda && (dtype == DType::bf16 || dtype == DType::f16));
  }
  return dtype == DType::f32 || dtype == DType::f64;
}

}  // namespace crema
