// ReLU and leaky ReLU, elementwise on tensors of any shape.
//
//   forward:   y = x > 0 ? x : negative_slope * x
//   backward:  dx = dy * (y > 0 ? 1 : negative_slope)
//
// The backward reads the OUTPUT y, not the input x, so a layer may run in place (y overwrites x)
// and still have what its backward needs. That is exact for negative_slope >= 0, where y > 0
// exactly when x > 0; a negative slope flips the sign of y for x < 0 and is refused by
// relu_backward. At x = 0 the derivative is taken as negative_slope (Caffe's and PyTorch's choice).
// y may alias x and dx may alias dy (the same pointer; partial overlaps are not allowed).
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops over n elements; explicitly instantiated for float and double in relu_ref.cpp.
template <class T>
void relu_forward(int64_t n, const T* x, T* y, T negative_slope);
template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx, T negative_slope);
}  // namespace ref

namespace cpu {
// The same, vectorized, on up to `num_threads` OpenMP threads for large n.
void relu_forward(int64_t n, const float* x, float* y, float negative_slope, int num_threads);
void relu_backward(int64_t n, const float* y, const float* dy, float* dx, float negative_slope,
                   int num_threads);
}  // namespace cpu

namespace cuda {
// scalar: one element per thread; vectorized: 16 bytes per thread and access (4 floats, 8 bf16 or
// f16; scalar where a pointer is not 16-byte aligned). T is float, bf16_t or f16_t (compute in
// float, one rounding per output). For float, the same values, bit for bit, as the CPU path.
enum class ReluVersion { scalar, vectorized, best = vectorized };
template <class T>
void relu_forward(int64_t n, const T* x, T* y, float negative_slope, ReluVersion version,
                  gpu::Stream stream);
template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx, float negative_slope,
                   ReluVersion version, gpu::Stream stream);
}  // namespace cuda

// Tensor level: x and y (and y, dy, dx) of one shape and dtype on the context's device: f32 (CPU
// and CUDA), f64 (CPU, which runs ref::), bf16 and f16 (CUDA). Throws
// crema::Error naming the tensors otherwise, and in relu_backward for negative_slope < 0.
void relu_forward(Context& ctx, const Tensor& x, Tensor& y, float negative_slope);
void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx,
                   float negative_slope);

}  // namespace crema::kernels
