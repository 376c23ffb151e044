// The forward of a channels-last convolution with few input channels -- a network's stem (ResNet's
// 3 -> 64 7x7 stride 2, VGG's and MobileNet's 3x3) -- on the tensor cores (mma.sync), bf16 and
// fp16 tensors, fp32 sums, one rounding at the store:
//
//   y[n,p,q,k] = act(sum over (r, s, c) of x[n, p*sh - ph + r, q*sw - pw + s, c] * w[k,r,s,c]
//                    + bias[k] + residual[n,p,q,k])
//
// Why: the implicit GEMMs gather the 3-channel input element by element (the loaders' VEC = 1
// path: each slab filled before the math, no overlap), at a third of cuDNN's fp16 speed on
// ResNet's stem. Here the reduction index is packed as kk = (r * S + s) * C2 + c (C2: C rounded up
// to even, the padding channel zero): for one output pixel and one filter row r, the S * C2
// values are consecutive in a row of x -- the S pixels its taps read, channels-last. A block
// stages the rows of x a band of output rows reads (zeros outside the image; each pixel C2 wide)
// in shared memory, with the filter packed the same way ([K][kk], ldmatrix rows); each lane then
// loads its A fragment's pairs of (s, c) values straight from the staged rows (32-bit loads: a
// pair never straddles two filter rows, S * C2 being even), B with ldmatrix, m16n8k16 per 16
// pixels x 8 output channels x 16 kk.
//
// Takes (fits): groups 1, dilation 1, C <= 8, K a multiple of 8 and at most 64, R * S * C2 at
// most 256 and S * C2 at least 8, and a band of one output row that fits the shared memory.
// Deterministic (each output one thread's sum in a fixed order).
//
// The filter gradient of the same layers (convolution_stem_filter_mma_cuda.cu), fp32 dw:
//
//   dw[k,r,s,c] += sum over (n, p, q) of dy[n,p,q,k] * x[n, p*sh - ph + r, q*sw - pw + s, c]
//
// one GEMM an output row, dw[K][R*S*C] += dy_row^T * B, B's columns (r, s, c) the staged rows of
// x transposed ([s*C + c][q] an input row: one 16-byte ldmatrix row of B is 8 output columns of
// one filter tap), so the reduction over (r, s, c) is not padded per tap nor per channel (the 7x7
// stem: 147 columns against 392 on x padded to 8 channels). Each block's sums stay in registers
// over a run of output rows and go to the workspace once; a second kernel adds them to dw in
// block order: deterministic.
//
// Takes (backward_filter_fits): groups 1, dilation 1, C < 8, K a multiple of 16 and at most 64,
// R * S * C at most 256, and dy's two row buffers plus R + stride_h staged input rows within
// 110 KB of shared memory, or a block's limit where lower (at K = 64: Q up to 160 for the 7x7
// stride-2 stem, 304 for a 3x3 stride-1 one).
#pragma once

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::stem_mma {

bool fits(const Conv2dGeometry& g);

// y is written; x, w, y (and the epilogue's residual) raw device pointers of `type`; y and the
// residual 4-byte aligned, x and w any; the epilogue's channel statistics are not taken (the
// caller runs another kernel for them).
void forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, gpu::Stream stream);

bool backward_filter_fits(const Conv2dGeometry& g);
// The blocks' partial sums (0 where it does not fit).
size_t backward_filter_workspace(const Conv2dGeometry& g);
// dw (fp32, [K,R,S,C]) += the filter gradient; x and dy raw device pointers of `type`, dy 16-byte
// aligned, x any; the workspace backward_filter_workspace(g) bytes, 4-byte aligned.
void backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy, float* dw,
                     void* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::stem_mma
