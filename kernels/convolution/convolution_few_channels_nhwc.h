// Backward data of a channels-last convolution with few input channels (C < 32: the 3-channel
// stem, LeNet's 20), direct on the CUDA cores, for fp32, bf16 and fp16 tensors:
//
//   dx[n,h,w,c] = sum over the taps (r, s) whose output (p, q) reads (h, w), and over k,
//                 of dy[n,p,q,k] * w[k,r,s,c]      (written; 16-bit: fp32 sums, one rounding)
//
// Why not a GEMM: the implicit GEMMs put C on their tile's columns (3 of 64 at work for the stem),
// and col2im (convolution_col2im_nhwc.h) writes and reads a [N*P*Q, R*S*C] fp32 matrix, 49 times
// dx's size for the stem. Here each thread owns 4 rows x 1 column of one output phase (the
// pixels h = ph_h + stride_h i, w = ph_w + stride_w j read dy at stride 1 with the phase's taps)
// and 4 channels, and a block stages a window of dy (its rows and columns plus the taps' reach,
// zeros outside the image) and a chunk of the filter in shared memory, k chunk by k chunk. A
// thread reads the window's rows once for all the taps of one filter column (a register window of
// 4 + taps - 1 rows), so each staged value feeds 4 x (taps a column) FMAs. Small phase planes
// (LeNet's 12 x 12) put several whole images in one block.
//
// Deterministic: each output's sum runs in a fixed order (k chunks, then filter columns, then
// rows). Takes (fits): groups 1, dilation 1, C < 32, at most 24 taps of one filter column in a
// phase (R <= 24 stride_h: DeepSpeech2's 41x11 at stride 2 has 21), and a window that fits the
// shared memory.
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::few_channels_nhwc {

using Element = depthwise_nhwc::Element;

bool fits(const Conv2dGeometry& g);

// What the kernel multiplies: the values as stored, or f32 tensors' values rounded as a GEMM
// math rounds them (tf32: to nearest, ties away, 10 mantissa bits, as cvt.rna; bf16: to nearest
// even, 7 bits); their products are exact in fp32 either way.
enum class Operands { stored, tf32, bf16 };

// The workspace: the filter packed as fp32 [C/4 groups][K rounded up to 16][R*S][4] (zeros past C
// and K), so that the blocks copy its chunks as runs of 16-byte vectors.
size_t workspace_bytes(const Conv2dGeometry& g);

// dx is written; dy, w and dx are raw device pointers of `type` (any alignment); the workspace
// 16-byte aligned, workspace_bytes(g) of it.
void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   void* workspace, gpu::Stream stream, Operands operands);

}  // namespace crema::kernels::cuda::few_channels_nhwc
