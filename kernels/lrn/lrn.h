// Local response normalization (Krizhevsky et al. 2012), Caffe's semantics, on x [N, C, H, W].
//
// With n = local_size (odd) and r = (n - 1) / 2:
//   across channels:  scale[n,c,h,w] = k + alpha / n   * sum_{c' = c-r .. c+r} x[n,c',h,w]^2
//   within a channel: scale[n,c,h,w] = k + alpha / n^2 * sum_{h' = h-r .. h+r, w' = w-r .. w+r}
//                                                             x[n,c,h',w']^2
//   y = x * scale^(-beta)
// Positions outside the tensor count as zeros (the window is zero-padded; its divisor stays n or
// n^2). Across channels this is PyTorch's nn.LocalResponseNorm(n, alpha, beta, k). Within a
// channel Caffe's own layer fixes k at 1; here k applies there too (the default k is 1).
//
// Backward: each window is symmetric (c' is in c's window exactly when c is in c''s), so
//   dx = dy * scale^(-beta) - (2 * alpha * beta / n) * x * sum_{window of x} (dy * y / scale)
// with n^2 in place of n within a channel. The forward saves `scale` for the backward.
//
// y may not alias x (the backward needs both); dx may not alias dy.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class LrnRegion { across_channels, within_channel };

struct LrnParams {
  LrnRegion region = LrnRegion::across_channels;
  int64_t local_size = 5;  // odd, positive
  float alpha = 1.0f, beta = 0.75f, k = 1.0f;
};

struct LrnShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
};

namespace ref {
// Plain loops, one output at a time; explicitly instantiated for float and double.
template <class T>
void lrn_forward(const LrnShape& s, const LrnParams& p, const T* x, T* y, T* scale);
template <class T>
void lrn_backward(const LrnShape& s, const LrnParams& p, const T* x, const T* y, const T* scale,
                  const T* dy, T* dx);
}  // namespace ref

namespace cpu {
// Across channels: a plane of H*W positions at a time, the channel window summed over
// contiguous, vectorized rows. Within a channel: a separable box sum (rows, then columns).
// Samples (and channels, within a channel) split over up to `num_threads` OpenMP threads.
void lrn_forward(const LrnShape& s, const LrnParams& p, const float* x, float* y, float* scale,
                 int num_threads);
void lrn_backward(const LrnShape& s, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// direct: one thread per element sums its whole window (n loads across channels, n^2 within).
// sliding: across channels, one thread per (sample, position) walks the C channels keeping a
//   running window sum (one load per element); within a channel it is `direct`.
enum class LrnVersion { direct, sliding, best = direct };

void lrn_forward(const LrnShape& s, const LrnParams& p, const float* x, float* y, float* scale,
                 LrnVersion version, gpu::Stream stream);
void lrn_backward(const LrnShape& s, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx, LrnVersion version,
                  gpu::Stream stream);
}  // namespace cuda

// Tensor level: x, y, scale, dy, dx float32 [N, C, H, W] of one shape on the context's device
// (or all float64 on the CPU, which runs ref::).
// Throws crema::Error naming the op and the tensor when they do not fit, and for a local_size
// that is not odd and positive.
void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y, Tensor& scale);
void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& y,
                  const Tensor& scale, const Tensor& dy, Tensor& dx);

}  // namespace crema::kernels
