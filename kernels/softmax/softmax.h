// Softmax and log-softmax along one axis. (Softmax fused with the cross-entropy loss lives with
// the losses: kernels/loss/softmax_cross_entropy.h.)
//
// A tensor is viewed as [outer, C, inner] around `axis` (C = its extent; outer and inner the
// products of the extents before and after it; axis may be negative, counting from the end).
// For every (o, i), with m = max_c x[o,c,i], z = x - m and s = sum_c exp(z[o,c,i]):
//   softmax:       y[o,c,i] = exp(z[o,c,i]) / s
//   log-softmax:   y[o,c,i] = z[o,c,i] - log(s)
//   fast softmax:  y[o,c,i] = exp(x[o,c,i]) / sum_c exp(x[o,c,i])   (cuDNN's CUDNN_SOFTMAX_FAST)
// Subtracting the max changes nothing mathematically and keeps exp from overflowing; log-softmax
// never takes the log of an underflowed probability, so it is finite wherever x is. The fast
// softmax skips the max pass: one read of x fewer, exact for logits below ~88 (exp(88.7) is
// float's largest), inf / inf = NaN above. Its backward is the softmax backward (it reads y).
//   softmax backward:      dx[o,c,i] = y[o,c,i] * (dy[o,c,i] - sum_c' dy[o,c',i] * y[o,c',i])
//   log-softmax backward:  dx[o,c,i] = dy[o,c,i] - exp(y[o,c,i]) * sum_c' dy[o,c',i]
//
// y may alias x (in-place softmax) and dx may alias dy.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops on [outer, C, inner] arrays; the oracle of the tests. Explicitly instantiated for
// float and double.
template <class T>
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx);
template <class T>
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads.
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads);
void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                          int num_threads);
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, int num_threads);
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         int num_threads);
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// thread_per_position: one thread walks a distribution's C classes (`inner` apart: coalesced
//   across threads when inner > 1, strided when inner == 1).
// warp_per_position: a warp per distribution, lanes over classes, max and sums by warp
//   butterflies (coalesced when inner == 1).
// by_shape: warp_per_position when inner == 1 and C > 16, thread_per_position otherwise.
// Log-softmax and the cross-entropy (kernels/loss/softmax_cross_entropy.h) run the same
// versions. See README.md.
enum class SoftmaxVersion { thread_per_position, warp_per_position, by_shape, best = by_shape };

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     SoftmaxVersion version, gpu::Stream stream);
void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                          SoftmaxVersion version, gpu::Stream stream);
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, SoftmaxVersion version, gpu::Stream stream);
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         SoftmaxVersion version, gpu::Stream stream);
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, SoftmaxVersion version, gpu::Stream stream);
}  // namespace cuda

// The [outer, C, inner] view of `t` around `axis` (also the cross-entropy's); throws crema::Error
// naming `op` when the axis is out of range.
struct SoftmaxExtents {
  int64_t outer, C, inner;
};
SoftmaxExtents softmax_extents(const char* op, const Tensor& t, int axis);

// Tensor level: x and y (y, dy, dx) of one shape, float32 on the context's device or float64 on
// the CPU (the reference). Throws crema::Error naming the tensors when they do not fit or the
// axis is out of range.
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
// The fast softmax (no max subtraction); its backward is softmax_backward.
void softmax_fast_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
void log_softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
void log_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);

}  // namespace crema::kernels
