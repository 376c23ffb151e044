// Layer normalization (Ba, Kiros & Hinton 2016), over one axis of any tensor: PyTorch's
// nn.LayerNorm over the last axis, and ConvNeXt's LayerNorm2d over the channels of NCHW.
//
// x is viewed as [outer, C, inner], C the normalized axis (inner = 1 for the last axis; inner =
// H*W for the channels of [N, C, H, W]). For each position (o, i), over c:
//   mean[o,i] = sum_c x[o,c,i] / C
//   var[o,i]  = sum_c (x[o,c,i] - mean)^2 / C                (biased, as PyTorch)
//   rstd[o,i] = 1 / sqrt(var + eps)
//   xhat      = (x - mean) * rstd
//   y[o,c,i]  = xhat[o,c,i] * weight[c] + bias[c]             (no weight: 1; no bias: 0)
// The forward keeps mean and rstd [outer * inner] for the backward. Backward, with g = dy * weight:
//   dx[o,c,i] = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
// (the derivation is above layers/layer_norm.cpp's backward), and for the layer's parameters
//   dweight[c] = sum_{o,i} dy * xhat,   dbias[c] = sum_{o,i} dy
// which are channel_reduce (kernels/scale/scale.h) of dy with xhat, written by the backward when
// asked: the same deterministic reductions as Scale's.
//
// Mean and variance are two passes over C (the mean first, then the squares of the deviations),
// in float32 on the float32 paths (double in ref::), never E[x^2] - E[x]^2. y may alias x in the
// forward; in the backward dx may alias dy, xhat aliases nothing.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops; the sums in double. weight and bias may be null; xhat may be null. Explicitly
// instantiated for float and double.
template <class T>
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* weight,
                        const T* bias, float eps, T* y, T* mean, T* rstd);
template <class T>
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* dy,
                         const T* weight, const T* mean, const T* rstd, T* dx, T* xhat);
}  // namespace ref

namespace cpu {
// inner = 1: one row of C per task, vector loops along the row. inner > 1: tasks of up to 256
// positions i of one o, each pass a loop over c outside a vector loop over the positions (the
// contiguous axis). Sums in float32. Threads over tasks; results independent of the thread count.
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const float* x,
                        const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, int num_threads);
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* dy,
                         const float* weight, const float* mean, const float* rstd, float* dx,
                         float* xhat, int num_threads);
}  // namespace cpu

namespace cuda {
// inner = 1 (rows): a warp per row, lanes strided along C, sums by warp shuffles; the row is read
// from global memory once per pass (it stays in L1). inner > 1 (columns): a thread per position
// (o, i), threads along i (coalesced), each looping over c. One version each.
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const float* x,
                        const float* weight, const float* bias, float eps, float* y, float* mean,
                        float* rstd, gpu::Stream stream);
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* dy,
                         const float* weight, const float* mean, const float* rstd, float* dx,
                         float* xhat, gpu::Stream stream);
}  // namespace cuda

// Tensor level: x, y (dy, dx, xhat) of one shape, C = x.dim(axis) (axis in [0, ndim)); weight and
// bias C elements or null; mean and rstd of x.numel() / C elements; all float32 (or all float64
// on the CPU, which runs ref::) on the context's device; eps > 0. Throws crema::Error naming the
// op and the tensor.
void layer_norm_forward(Context& ctx, const Tensor& x, const Tensor* weight, const Tensor* bias,
                        int axis, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor* weight,
                         const Tensor& mean, const Tensor& rstd, int axis, Tensor& dx,
                         Tensor* xhat);

}  // namespace crema::kernels
