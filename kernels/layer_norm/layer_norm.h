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
// which the backward adds into the parameters' gradients when asked: deterministic sums (fixed
// order; on CUDA per-block partials added in block order, no atomics). ref:: and cpu:: write
// xhat for them, summed by channel_reduce (kernels/scale/scale.h).
//
// Mean and variance are two passes over C (the mean first, then the squares of the deviations),
// in float32 on the float32 and 16-bit paths (double in ref::), never E[x^2] - E[x]^2; bf16 and
// f16 are storage only (one rounding at each store). y may alias x in the forward; in the
// backward dx may alias dy, xhat aliases nothing.
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
// T (x, y, dy, dx): float, bf16_t or f16_t; weight, bias, mean, rstd, dweight, dbias float32.
// Rows (inner = 1) of whole 16-byte vectors, at most 128 of them, with aligned pointers: the
// vectorized kernels of layer_norm_rows_cuda.cu (a group of 8 to 32 lanes per row, the row in
// registers: x read once by the forward, x and dy once by the backward, the parameter sums fused
// into it). Other rows: a warp per row; columns (inner > 1): a thread per position (o, i), along
// i. The backward writes dx when not null and adds (+=) dweight = sum dy xhat and dbias = sum dy
// when not null, through per-block partials in `workspace` added in a fixed order (no atomics).
template <class T>
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const float* weight,
                        const float* bias, float eps, T* y, float* mean, float* rstd,
                        gpu::Stream stream);
// Bytes of `workspace` layer_norm_backward needs for the parameter sums.
template <class T>
size_t layer_norm_backward_workspace_bytes(int64_t outer, int64_t C, int64_t inner);
template <class T>
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* dy,
                         const float* weight, const float* mean, const float* rstd, T* dx,
                         float* dweight, float* dbias, void* workspace, gpu::Stream stream);
}  // namespace cuda

// Tensor level. x, y (dy, dx) of one shape and dtype: float32 (CPU and CUDA), float64 (the CPU,
// which runs ref::), bf16 or f16 (CUDA); weight, bias, mean, rstd, dweight, dbias float32 (float64
// beside float64): weight and bias C = x.dim(axis) elements or null; mean and rstd x.numel() / C.
// A 4-D tensor stored nhwc is normalized along its logical `axis` too: the kernels see memory as
// [outer, C, inner], so the channels (axis 1) of an nhwc map are rows. eps > 0. The backward
// writes dx (null: not wanted) and accumulates (+=) dweight and dbias (null: not wanted).
// Throws crema::Error naming the op and the tensor.
void layer_norm_forward(Context& ctx, const Tensor& x, const Tensor* weight, const Tensor* bias,
                        int axis, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor* weight,
                         const Tensor& mean, const Tensor& rstd, int axis, Tensor* dx,
                         Tensor* dweight, Tensor* dbias);

}  // namespace crema::kernels
