// Backward data of a channels-last convolution with few input channels that are not a whole
// 16-byte vector (the 3-channel stem, LeNet's 20), as one GEMM and a gather:
//
//   cols[n*P*Q + p*Q + q, (r*S + s)*C + c] = sum over k of dy[n,p,q,k] * w[k,r,s,c]
//       (dy as the GEMM's [N*P*Q, K] matrix, w as its [K, R*S*C]: both as stored)
//   dx[n,h,w,c] = sum over the taps (r, s) whose output (p, q) reads (h, w)  of cols[(n,p,q), (r,s,c)]
//       (p = (h + pad_h - r*dil_h) / stride_h exact and inside P, q likewise: the gather form, r
//       and s in increasing order -- deterministic)
//
// The implicit-GEMM kernels put C on the tile's N side: with C = 3 a tile is 3/64 full and every
// element is a scalar gather, so the stem's data gradient took 1.7 ms in bf16 and 8.2 ms in tf32
// at N = 64 (cuDNN: 0.88 and 1.33). Here the GEMM's N side is R*S*C = 147 and its operands are
// read as stored; cols goes through memory twice, in chunks of whole images that keep it within
// kColsBudget bytes of workspace.
//
// bf16 tensors: cuda::gemm_bf16 (TMA + wgmma, compute capability 9.0), fp32 cols, one rounding
// at dx's store. f32 tensors in tf32: cuda::sgemm in tf32 (operands rounded to TF32, fp32 sums).
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/geometry.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda::col2im_nhwc {

// The largest cols chunk (whole images; at least one image whatever its size).
constexpr size_t kColsBudget = size_t(64) << 20;

// Whether the geometry takes this path: one group, 1 < C < 32 with C not a multiple of
// `vector` (8 for 16-bit tensors, 4 for f32) -- the channels the vector loaders cannot take.
// The device and the pointers are the caller's to check.
bool fits(const Conv2dGeometry& g, int vector);

// Bytes of workspace (16-byte aligned): a cols chunk and the GEMM's own copies.
size_t workspace_bf16(const Conv2dGeometry& g);
size_t workspace_f32(const Conv2dGeometry& g, GemmMath math);

// dx is written. dy must be 16-byte aligned where K is a multiple of 8 (gemm_bf16 reads it in
// place then); the caller checks aligned16(dy) and compute capability 9.0.
void backward_data_bf16(const Conv2dGeometry& g, const void* dy, const void* w, void* dx,
                        void* workspace, gpu::Stream stream);
void backward_data_f32(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                       void* workspace, gpu::Stream stream, GemmMath math);

}  // namespace crema::kernels::cuda::col2im_nhwc
