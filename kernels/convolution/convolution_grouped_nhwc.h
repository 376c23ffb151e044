// Grouped convolution with few channels a group (ResNeXt's 32 groups of 4, 8 or 16) on
// channels-last tensors, direct on the CUDA cores, for bf16 and fp16 tensors: x [N,H,W,C],
// w [K,R,S,Cg], y and dy [N,P,Q,K], dx [N,H,W,C], Cg = C/groups and Kg = K/groups each 4, 8 or 16
// (the formulas are conv2d_*_nhwc's in convolution.h). 16-bit tensors sum in fp32 and round once
// at the store; the filter gradient is fp32.
//
// Why not the implicit GEMMs: a group's GEMM has Kg columns and an R*S*Cg reduction, so the
// tensor-core tiles (64 columns or more, 32-wide reduction steps) idle 90% and more on 4 x 4
// groups (13-15x cuDNN at ResNeXt-50's 56 x 56: MEASUREMENTS.md, "Grouped convolutions with few
// channels a group"). Here every product is useful:
//
//   forward  y[n,p,q,k]  = act(sum_{r,s,c} w[k,r,s,c] x[n, p sh - ph + r dh, q sw - pw + s dw,
//                              g(k) Cg + c] + bias[k] + residual[n,p,q,k])   (written; TcEpilogue)
//   data     dx[n,h,w,c] = sum_{r,s,k in c's group} w[k,r,s,c mod Cg] dy[n,p,q,k] over the taps
//                          whose output (p, q) reads (h, w)              (written)
//   filter   dw[k,r,s,c] += sum_{n,p,q} dy[n,p,q,k] x[n, .., .., g(k) Cg + c]   (fp32,
//                          deterministic: fixed slices of N*P*Q, summed in slice order)
//
// Forward and data are one correlation kernel (convolution_grouped_nhwc_cuda.cu): a thread owns 4
// output channels of one group and a strip of outputs of a row; for 3x3 filters at horizontal
// stride 1 or 2 it loads a filter row's input columns for the whole strip at once (each once),
// else tap by tap, and takes its 4 x (inputs a group) weights of each tap from shared memory
// (the block's slab of the filter, widened to fp32). Backward data at stride 1 is that
// correlation of dy with the filter transposed within each group and rotated by 180 degrees; at
// larger strides each dx pixel gathers the taps whose output reads it. The filter gradient
// (convolution_grouped_nhwc_filter_cuda.cu): a thread owns 4 output channels, the group's Cg
// inputs and a run of one filter row's taps, and walks strips of output positions; a block adds
// its rows in order into its slice's partial sums (the workspace), which a second kernel adds in
// a fixed order into dw.
//
// Takes (fits): groups > 1, not depthwise, Cg and Kg each 4, 8 or 16, the filter's taps of a
// thread's slab in 48 KB of shared memory (R*S*max(Cg, Kg) <= 3072), and 16-byte aligned tensors
// (aligned(); the callers take the implicit GEMMs otherwise). Which passes `best` gives it:
// convolution_tc.h (conv2d_tc_*_uses_grouped). f32 NHWC tensors keep the implicit GEMMs (not yet
// measured against these loops). Pointers are raw device pointers of the type.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::grouped_nhwc {

bool fits(const Conv2dGeometry& g);
// Whether a pass's pointers (null ones ignored) are 16-byte aligned, as its vectors need.
bool aligned(std::initializer_list<const void*> pointers);

// The forward's workspace: the per-block partial sums of the channel statistics (0 without them).
size_t forward_workspace(const Conv2dGeometry& g, bool with_statistics);
// The filter gradient's partial sums [slice][group][R*S][Cg][Kg] (fp32).
size_t backward_filter_workspace(const Conv2dGeometry& g);

// y is written (epilogue as conv2d_tc_forward's; the statistics take the workspace).
void forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, void* workspace, gpu::Stream stream);
// dx is written; no workspace.
void backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* w, void* dx,
                   gpu::Stream stream);
// dw (fp32, [K,R,S,Cg]) += the filter gradient.
void backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy, float* dw,
                     void* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::grouped_nhwc
