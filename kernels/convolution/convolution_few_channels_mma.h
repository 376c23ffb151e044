// Backward data of a stride-1 channels-last convolution with few input channels (C <= 32:
// LeNet's 20 <- 50 5x5) on the tensor cores (mma.sync), for bf16 and fp16 tensors and f32
// tensors in tf32:
//
//   dx[n,h,w,c] = sum over (r, s, k) of dy[n, h + pad_h - r, w + pad_w - s, k] * w[k,r,s,c]
//                 (written; fp32 sums, 16-bit: one rounding at the store)
//
// Why: the implicit GEMMs put C on a tile's 64 or 128 columns and read dy and w element by element
// where K or C is not a whole 16-byte vector; col2im (convolution_col2im_nhwc.h) writes and reads
// a [N*P*Q, R*S*C] fp32 matrix; the direct kernel (convolution_few_channels_nhwc.h) runs on the
// CUDA cores. Here a block keeps the whole filter in shared memory (packed once a call into the
// workspace as [R*S][C rounded up to 8][K padded], the elements as the mma reads them), and, for
// each tile of dx (one image, or a band of rows of one), stages dy's window -- the tile's rows and
// columns plus the filter's reach, zeros outside the image -- as [row][column][K padded]. The GEMM
// of a tap (r, s) is then A = the window shifted by (r, s) (rows: the tile's pixels, inner: k),
// B = the tap's [C][K] slice: ldmatrix reads both straight from the staged tiles (each lane names
// its own pixel's row, so the shift is an address offset), one m16n8k16 (bf16, fp16) or m16n8k8
// (tf32: 32 bytes of k either way) per 16 pixels x 8 channels x k step. Blocks are persistent
// (the filter is staged once a block) and double-buffer the windows: the next tile's copies
// travel while the current one is multiplied.
//
// Deterministic: each output is one thread's sum in a fixed order (taps, then k). f32 tensors:
// both operands rounded to tf32 (cvt.rna, as the mma.sync kernels read them); their products are
// exact in fp32.
//
// Takes (fits): stride 1, dilation 1, groups 1, C <= 32, and the filter plus two windows of at
// least one row in the shared memory a block may have.
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::few_channels_mma {

using Element = depthwise_nhwc::Element;

bool fits(const Conv2dGeometry& g, Element type);

// The workspace: the packed filter, [R*S][C rounded up to 8][pitch] elements of `type`.
size_t workspace_bytes(const Conv2dGeometry& g, Element type);

// dx is written; dy, w and dx are raw device pointers of `type` (any alignment); the workspace
// 16-byte aligned, workspace_bytes(g, type) of it. f32: tf32 math.
void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   void* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::few_channels_mma
