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

// The kernel versions, each pass its own (MEASUREMENTS.md, "Depthwise on channels-last tensors",
// has the design and the numbers; `crema bench conv --layout nhwc` and `crema bench conv-tc` time
// every version that takes a geometry):
//   forward, backward data at stride 1
//     v1  row walk: each thread walks the input rows of its strip of 4 outputs through L1/L2
//     v2  halo tile: the block's input tile (its output rows and columns plus the halo) copied
//         once into shared memory (cp.async, the padding zero-filled), then the same row walk
//         from shared memory: DRAM and L2 read each input element about once, all in flight at
//         once; square 3x3, 5x5, 7x7 filters, strides (1, 1) or (2, 2), no dilation, M = 1,
//         16-byte vectors
//     v3  v2 pipelined: ~2 blocks an SM take the tiles in turn with two buffers, the next
//         tile's copies in flight while the current one is walked
//   backward data at a larger stride: v1 (the gather) only
//   backward filter
//     v1  16-byte vectors, the filter rows in groups of at most kWalkSums sums a thread (a bf16
//         7x7 or 5x5: one row a group, so x and dy are read R times), ~4 blocks an SM
//     v2  v1 with the slices cut to whole waves of resident blocks (no nearly empty last wave)
//     v3  vectors narrowed (4, 8 or 16 bytes) so that a thread holds the whole filter's sums
//         (3x3: 16 bytes; 5x5: 4 channels; 7x7: 2 channels): one pass over x and dy instead
//         of one a row group, whole waves
//     v4  bands: a block copies a band of dy rows and the x rows they read into shared memory
//         (cp.async), each thread sums one filter row's S taps over a run of one output row
//         with the last S x vectors in a register ring: DRAM and L2 read x and dy about once;
//         S = 3, 5, 7 and R <= 7, strides (1, 1) or (2, 2), no dilation, M = 1, 16-byte vectors
// Version::best is choose()'s pick: production's rule, per pass, type and filter, in one place
// (convolution_depthwise_nhwc_versions.cpp).
enum class Version { best, v1, v2, v3, v4 };
enum class Pass { forward, data, filter };
const char* version_name(Version version);  // "v1", ...; "best"
Version choose(Pass pass, const Conv2dGeometry& g, Element type);
// The version that runs when `asked` is asked for (best: choose()'s) on 16-byte aligned tensors:
// a version that does not take the geometry falls back to v1.
Version runs(Pass pass, const Conv2dGeometry& g, Element type, Version asked);

// The filter gradient's row walk: the sums a thread holds, at most, in v1 and v2 (the filter rows
// grouped to fit) and in v3 (the whole filter: vectors narrowed to fit). narrow_filter_channels:
// v3's channels a thread, 0 where v3 does not take g.
constexpr int kWalkSums = 72, kWholeFilterSums = 100;
// v3's channels a thread for an S-wide filter, vec channels in 16 bytes: the widest vector (a
// power of two) whose S*S sums fit kWholeFilterSums (bf16: 3x3 8, 5x5 4, 7x7 2).
constexpr int whole_filter_channels(int S, int vec) {
  return vec > 1 && S * S * vec > kWholeFilterSums ? whole_filter_channels(S, vec / 2) : vec;
}
int narrow_filter_channels(const Conv2dGeometry& g, Element type);

// The forward's workspace (every version): the per-block partial sums of the channel statistics
// (0 without them).
size_t forward_workspace(const Conv2dGeometry& g, bool with_statistics);
// The filter gradient's partial sums [slice, R*S, K] (fp32; every version).
size_t backward_filter_workspace(const Conv2dGeometry& g);

// y is written; epilogue.residual is of the element type; the statistics, when asked, are the
// per-channel sums of y as stored and of its square (fp32, fixed order).
void forward(const Conv2dGeometry& g, Element type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, void* workspace, gpu::Stream stream,
             Version version = Version::best);
// dx is written. No workspace: the filter is read straight into each block's shared memory.
void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   gpu::Stream stream, Version version = Version::best);
// dw (fp32, [K,R,S,1]) += the filter gradient.
void backward_filter(const Conv2dGeometry& g, Element type, const void* x, const void* dy,
                     float* dw, void* workspace, gpu::Stream stream,
                     Version version = Version::best);

}  // namespace crema::kernels::cuda::depthwise_nhwc
