// Per-channel scale and bias (Caffe's Scale and Bias layers). x is viewed as [outer, C, inner],
// where the C "channels" are the axes [axis, axis + num_axes) of x (one axis, C, in the common
// case; several, e.g. [N, C] of an [N, C, H, W] input, when the scale comes from a blob):
//   forward:         y[o, c, i] = x[o, c, i] * scale[c] + bias[c]   (no scale: 1; no bias: 0)
//   backward data:   dx[o, c, i] = dy[o, c, i] * scale[c]           (the forward applied to dy)
//   backward params: dscale[c] = sum_{o, i} dy[o, c, i] * x[o, c, i]
//                    dbias[c]  = sum_{o, i} dy[o, c, i]
// The sums are channel_reduce: out[c] = (accumulate ? out[c] : 0) + sum_{o, i} dy * (x or 1),
// accumulating for parameter gradients (+=) and writing for a bottom's gradient (=). They are
// deterministic: fixed order on the CPU, a fixed partition and tree on the GPU, no atomics.
// y may alias x (in place); out aliases nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops over the definitions; the sums accumulate in double, in (o, i) order. Explicitly
// instantiated for float and double.
template <class T>
void scale_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* scale,
                   const T* bias, T* y);
template <class T>
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, T* out);
}  // namespace ref

namespace cpu {
// Forward: the (o, c) rows spread over OpenMP threads, each a vector loop. Reduce: the channels
// spread over threads, each summed by one thread in double in a fixed order, so the result does
// not depend on the thread count; with inner = 1 a thread takes 16 neighbouring channels and
// walks the rows once (the same sums in the same order).
void scale_forward(int64_t outer, int64_t C, int64_t inner, const float* x, const float* scale,
                   const float* bias, float* y, int num_threads);
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const float* dy, const float* x,
                    bool accumulate, float* out, int num_threads);
}  // namespace cpu

namespace cuda {
// Reduce: block_per_channel: one block sums one channel's outer * inner products (in double,
// fixed tree); split: each channel's products are cut into S segments fixed by the sizes, a
// block per (channel, segment) writes a partial to the workspace, and a second kernel adds each
// channel's S partials in order (all SMs busy when C is small); with inner = 1 (rows: [N, C], or
// channels-last) split sums tiles of 32 channels over segments of rows instead, coalesced along
// C; planes: segments of about 8192 positions (C * S <= 4096 blocks) walked plane piece by plane
// piece, 16-byte loads where aligned, no division per element (inner < 256 takes split's kernel,
// inner = 1 its rows). See README.md. T (x, y, dy): float, bf16_t or f16_t; scale, bias and out
// float32.
enum class ReduceVersion { block_per_channel, split, planes, best = planes };
template <class T>
void scale_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const float* scale,
                   const float* bias, T* y, gpu::Stream stream);
// Bytes of device workspace channel_reduce needs (0 for block_per_channel).
size_t channel_reduce_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                      ReduceVersion version);
template <class T>
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, float* out, void* workspace, ReduceVersion version,
                    gpu::Stream stream);
// A batch of the above: `batch` entries of [outer, C, inner] one after another, entry b's
// channels being b C .. b C + C - 1 of scale, bias and out (squeeze-excitation's gate [N, C] on a
// channels-last x [N, H*W, C]: batch N, outer H*W, inner 1; a batch needs inner = 1 and split in
// channel_reduce). S, the scale's and out's type: float, or T (a 16-bit second bottom and its
// gradient).
template <class T, class S>
void scale_forward(int64_t batch, int64_t outer, int64_t C, int64_t inner, const T* x,
                   const S* scale, const float* bias, T* y, gpu::Stream stream);
size_t channel_reduce_workspace_bytes(int64_t batch, int64_t outer, int64_t C, int64_t inner,
                                      ReduceVersion version);
template <class T, class S>
void channel_reduce(int64_t batch, int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, S* out, void* workspace, ReduceVersion version,
                    gpu::Stream stream);
}  // namespace cuda

// Tensor level: x, y (dy) of one shape and dtype; scale, bias and out float32 tensors of
// C = x.dim(axis) * ... * x.dim(axis + num_axes - 1) elements (any shape); all on the context's
// device (all float64 on the CPU runs ref::; x, y, dy bf16 or f16 on CUDA, with float32 bias and
// float32 or x's dtype scale and out: a learned parameter, or a second bottom and its gradient).
// A 4-D x stored nhwc takes axis 1, num_axes 1 (its channels: rows of C in memory) or axis 0,
// num_axes 2 (a scale per (n, c): squeeze-excitation's gate). scale, bias and x in
// channel_reduce may be null. Throws crema::Error naming the tensor.
void scale_forward(Context& ctx, const Tensor& x, const Tensor* scale, const Tensor* bias, int axis,
                   int num_axes, Tensor& y);
void channel_reduce(Context& ctx, const Tensor& dy, const Tensor* x, int axis, int num_axes,
                    bool accumulate, Tensor& out);

}  // namespace crema::kernels
