// Depthwise convolution on channels-last tensors (C == groups > 1, M = K/C filters per channel;
// output channel k reads input channel k / M) on the GPU, for fp32, bf16 and fp16 tensors:
// x [N,H,W,C], w [K,R,S,1], y and dy [N,P,Q,K], dx [N,H,W,C]. The direct loops of v4
// (convolution_depthwise_cuda.cu) laid out for channels-last memory; what the grouped implicit
// GEMMs of cuda::conv2d_*_nhwc and conv2d_tc_* (one channel a group: ~3% of every tile at work)
// hand over to when g.depthwise(). 16-bit tensors sum in fp32 and round once at the store.
//
//   forward  y[n,p,q,k]  = act(sum_{r,s} w[k,r,s] x[n, p*sh - ph + r*dh, q*sw - pw + s*dw, k/M]
//                              + bias[k] + residual[n,p,q,k])           (written; TcEpilogue)
//   data     dx[n,h,w,c] = sum_{m,r,s} w[c*M+m,r,s] dy[n,p,q,c*M+m] over the taps whose output
//                          (p, q) reads (h, w)                          (written; gather form)
//   filter   dw[k,r,s]  += sum_{n,p,q} dy[n,p,q,k] x[n, .., .., k/M]    (fp32, deterministic:
//                          fixed slices of N*P*Q, partials in the workspace summed in slice order)
//
// Layout of the work (convolution_depthwise_nhwc_cuda.cu has the details): threads across the
// channels, 16 bytes each (4 fp32 or 8 bf16/fp16 channels) where M == 1, C is a multiple of that
// and the tensors are 16-byte aligned, one channel each otherwise (any C, any M, any pointer); a
// block owns a slab of channels (the filter's taps for the slab staged in shared memory, [tap][c])
// and a run of output positions, each thread a strip of consecutive outputs of one row.
//
// Pointers are raw device pointers of the element type; the workspace queries give bytes.
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::depthwise_nhwc {

enum class Element { f32, bf16, f16 };
inline Element element_of(TcType type) {
  return type == TcType::bf16 ? Element::bf16 : Element::f16;
}

// The forward's workspace: the per-block partial sums of the channel statistics (0 without them).
size_t forward_workspace(const Conv2dGeometry& g, bool with_statistics);
// The filter gradient's partial sums [slice, R*S, K] (fp32).
size_t backward_filter_workspace(const Conv2dGeometry& g);

// y is written; epilogue.residual is of the element type; the statistics, when asked, are the
// per-channel sums of y as stored and of its square (fp32, fixed order).
void forward(const Conv2dGeometry& g, Element type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, void* workspace, gpu::Stream stream);
// dx is written. No workspace: the filter is read straight into each block's shared memory.
void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   gpu::Stream stream);
// dw (fp32, [K,R,S,1]) += the filter gradient.
void backward_filter(const Conv2dGeometry& g, Element type, const void* x, const void* dy,
                     float* dw, void* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::depthwise_nhwc
