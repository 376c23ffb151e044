// Cast: y = x converted to another dtype, element by element (PyTorch's `x.to(dtype)`).
//
//   to f32 or f64 from a narrower type: exact (every bf16, f16 and f32 value is an f64 value)
//   f64 -> f32: rounded to nearest even
//   to bf16 or f16: rounded to nearest even from the f32 value (core/float16.h: overflow to
//     infinity, f16 subnormals, NaN to the quiet NaN of its sign); an f64 is first rounded to f32,
//     as PyTorch's conversions do (two roundings, which differ from one only on exact ties)
//   same dtype: a copy
//
// The CPU converts between any two of f32, f64, bf16, f16; CUDA between any two of f32, bf16,
// f16, with the same bits as the CPU.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace cpu {
// n elements of x (dtype `from`) into y (dtype `to`), on up to `num_threads` OpenMP threads. This
// is also the reference: each element goes through the host conversions of core/float16.h.
void cast(int64_t n, DType from, const void* x, DType to, void* y, int num_threads);
}  // namespace cpu

namespace cuda {
// One version: a grid-stride loop, 8 elements per thread and iteration through 16-byte loads and
// stores (one or two per array) when x and y are 16-byte aligned, the last n % 8 elements (or all
// of them, when a pointer is not aligned) one per thread. f32, bf16 and f16 only.
void cast(int64_t n, DType from, const void* x, DType to, void* y, gpu::Stream stream);
}  // namespace cuda

// Tensor level: x and y of one shape on the context's device, of any dtypes the device converts
// between; crema::Error naming the op, the tensors and what exists otherwise.
void cast(Context& ctx, const Tensor& x, Tensor& y);
// A new tensor of x's shape in `dtype`, on the context's device (Tensor::to, for code above core).
Tensor cast_to(Context& ctx, const Tensor& x, DType dtype);

}  // namespace crema::kernels
