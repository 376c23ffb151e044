// Elementwise combination of K >= 1 tensors x_0 .. x_{K-1} of one shape (Caffe's Eltwise), over
// their n elements e:
//   sum:   y[e] = 0 + c_0 x_0[e] + c_1 x_1[e] + ... + c_{K-1} x_{K-1}[e]     (added in that order)
//   prod:  y[e] = x_0[e] * x_1[e] * ... * x_{K-1}[e]
//   max:   y[e] = max_j x_j[e];  argmax[e] = the first j attaining it, as a float (ties go to the
//          lowest j, as in Caffe; a NaN wins over numbers, the first NaN, so divergence shows)
// Backward, for input i:
//   sum:   dx_i = c_i dy                                 (kernels::axpby with beta 0)
//   prod:  dx_i[e] = dy[e] * prod_{j != i} x_j[e]         (the product of the others, multiplied
//          in j order: exact where some x_j is 0, unlike dy * y / x_i; Caffe's stable_prod_grad)
//   max:   dx_i[e] = argmax[e] == i ? dy[e] : 0           (the gradient goes to the first max)
// y, dx and argmax never alias an input.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops over the definitions, element by element; `x` holds the K input pointers.
// Explicitly instantiated for float and double.
template <class T>
void eltwise_sum(int64_t n, int K, const T* const* x, const T* coeff, T* y);
template <class T>
void eltwise_prod(int64_t n, int K, const T* const* x, T* y);
template <class T>
void eltwise_prod_backward(int64_t n, int K, const T* const* x, int i, const T* dy, T* dx);
template <class T>
void eltwise_max(int64_t n, int K, const T* const* x, T* y, T* argmax);
template <class T>
void eltwise_max_backward(int64_t n, int i, const T* dy, const T* argmax, T* dx);
}  // namespace ref

namespace cpu {
// The same arithmetic in the same order (so the same bits as ref<float>), over blocks of
// elements: each input is streamed through a block that stays in L1, and the blocks are spread
// over OpenMP threads.
void eltwise_sum(int64_t n, int K, const float* const* x, const float* coeff, float* y,
                 int num_threads);
void eltwise_prod(int64_t n, int K, const float* const* x, float* y, int num_threads);
void eltwise_prod_backward(int64_t n, int K, const float* const* x, int i, const float* dy,
                           float* dx, int num_threads);
void eltwise_max(int64_t n, int K, const float* const* x, float* y, float* argmax, int num_threads);
void eltwise_max_backward(int64_t n, int i, const float* dy, const float* argmax, float* dx,
                          int num_threads);
}  // namespace cpu

namespace cuda {
// One version, templated on the storage type T (float, bf16_t, f16_t; arithmetic in float): a
// group of 16 bytes of each tensor per thread (one element where a pointer is not 16-byte
// aligned); the input pointers travel in the kernel's parameters, kMaxInputsPerLaunch at a time
// (more inputs take more launches, each continuing from the previous one's y, so the order of the
// operations is the reference's; in bf16 and f16 each launch rounds y once). See README.md.
constexpr int kMaxInputsPerLaunch = 8;
template <class T>
void eltwise_sum(int64_t n, int K, const T* const* x, const float* coeff, T* y, gpu::Stream stream);
template <class T>
void eltwise_prod(int64_t n, int K, const T* const* x, T* y, gpu::Stream stream);
template <class T>
void eltwise_prod_backward(int64_t n, int K, const T* const* x, int i, const T* dy, T* dx,
                           gpu::Stream stream);
template <class T>
void eltwise_max(int64_t n, int K, const T* const* x, T* y, T* argmax, gpu::Stream stream);
template <class T>
void eltwise_max_backward(int64_t n, int i, const T* dy, const T* argmax, T* dx,
                          gpu::Stream stream);
}  // namespace cuda

// Tensor level: tensors of one shape and dtype on the context's device (f32 on CPU and CUDA; f64
// on the CPU: the reference; bf16 and f16 on CUDA, where argmax holds the index in that dtype, so
// eltwise_max takes at most 256 inputs in bf16 and 2048 in f16, the integers they hold exactly),
// at least one input, one coefficient per input, 0 <= i < K. Throws crema::Error naming the
// tensor otherwise.
void eltwise_sum(Context& ctx, const std::vector<const Tensor*>& x, const std::vector<float>& coeff,
                 Tensor& y);
void eltwise_prod(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y);
void eltwise_prod_backward(Context& ctx, const std::vector<const Tensor*>& x, int i,
                           const Tensor& dy, Tensor& dx);
void eltwise_max(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y, Tensor& argmax);
void eltwise_max_backward(Context& ctx, const Tensor& dy, const Tensor& argmax, int i, Tensor& dx);

}  // namespace crema::kernels
