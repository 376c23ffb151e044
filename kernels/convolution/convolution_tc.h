// Convolution on 16-bit tensors (bf16 or fp16) with tensor cores, channels-last: the three passes
// as implicit GEMMs over x [N,H,W,C], w [K,R,S,C/groups], y and dy [N,P,Q,K], dx [N,H,W,C]
// (the formulas are conv2d_*_nhwc's in convolution.h). Products on mma.sync m16n8k16 (bf16 or
// f16 operands), sums in fp32, one rounding to the tensor's type at the store; the filter
// gradient stays fp32 (it feeds the fp32 master weights).
//
//   forward  y  = act(conv(x, w) + bias + residual)  rounded once; bias fp32 [K] or null,
//                 residual [N,P,Q,K] of the tensors' type or null, act = ReLU or identity;
//                 optionally the per-channel sums of y and y^2 (fp32)
//   data     dx = the transposed convolution of dy by w  (written)
//   filter   dw += sum over N*P*Q of dy * patches(x)      (fp32, accumulated, deterministic: fixed
//                 slices of N*P*Q summed in a fixed order, no float atomics)
//
// A pass takes 16-byte copies (cp.async) of 8 channels where its channel counts (forward C/groups,
// data K/groups, filter C/groups and K/groups) are multiples of 8 and the tensors are 16-byte
// aligned, and element-wise loads otherwise (any C: the 3-channel stem, whose filter gradient
// runs on a copy of x padded to 8 channels in the workspace). Any stride, padding, dilation and
// groups. The kernels and their tiles: convolution_tc_gemm.cuh; the loaders:
// convolution_tc_loaders.cuh; README.md, "bf16 and fp16 tensors".
//
// On an H100 or H200 (compute capability 9.0), a convolution with groups 1, C and K multiples of 8
// and 16-byte aligned tensors (x, w, y, residual, dy, dx) runs on warpgroup MMA (wgmma) fed by TMA
// instead (convolution_tc_wgmma*_sm90a.cu) where it is a 1x1 without padding -- backward data at
// any stride, forward at any stride with Q <= 128 and stride_w * Q <= stride_h * W -- and, where
// it has any other filter and whole rows of its output (forward P x Q, data H x W) fill at least
// 96 of 128 tile rows (whole images a tile where one fills at most half: ResNet's 3x3 at 56, 28,
// 14 and 7 at N >= 2, not a single 7 x 7 image): forward at strides up to 8 (Q *
// stride_w <= 256), backward data at any stride whose every output phase has taps and fills the
// tiles so (its rows: the phase's part of H x W); the filter gradient at strides up to 4 with any
// filter (`best`: a 1x1 without padding, C = 64 with taps, or K >= 128 with C >= 32; `best`
// also leaves the forward of taps over C < 24 and the data of a 1x1 with C or K under 40 to
// mma.sync). Within the same
// bounds, deterministic, but not bit for bit the mma.sync kernels' results.
//
// Depthwise geometries (g.depthwise(): C == groups > 1) run the direct kernels of
// convolution_depthwise_nhwc.h instead (any `kernels`), with the same epilogue, the same
// write / accumulate rules and their own workspace sizes from the queries below.
//
// Pointers are raw device pointers of `type` (cuda_bf16's __nv_bfloat16 or cuda_fp16's __half,
// passed as void until the Tensor carries these dtypes); the workspace queries give bytes; the
// pointers must not alias (residual may be y itself: each element is read once, then written).
#pragma once

#include <cstddef>

#include "core/cuda_runtime.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda {

enum class TcType { bf16, f16 };
const char* tc_type_name(TcType type);

struct TcEpilogue {
  const float* bias = nullptr;     // [K], fp32
  const void* residual = nullptr;  // [N,P,Q,K], the tensors' type
  bool relu = false;
  // Both or neither: [K] fp32, written: per channel, the sum over N*P*Q of y as stored and of
  // its square (batch norm's statistics), in a fixed order (warp partials in the workspace, then
  // one reduction kernel): deterministic.
  float* sum = nullptr;
  float* sum_squares = nullptr;
};

// Which kernels a pass runs: `best` picks per geometry (README.md, "On wgmma and TMA": wgmma where
// it fits and measured faster, else mma.sync; backward data with few channels direct, below);
// the others force one family, for the benchmark (`crema bench conv-tc` times each) and the
// tests. wgmma (the ring kernel: A read again for every tap, never halo tiles) needs compute
// capability 9.0, a geometry it fits and 16-byte aligned operands;
// col2im (convolution_col2im_nhwc.h: backward data as one GEMM and a gather, for 1 < C < 32 not a
// multiple of the 16-byte vector, groups 1; bf16 on compute capability 9.0 with dy 16-byte
// aligned, f32 in tf32) only backward data; direct (convolution_few_channels_nhwc.h: backward
// data on the CUDA cores, fp32 sums, for C < 32, groups 1, dilation 1; `best` takes it where C is
// not a multiple of 8 and at most 8 of them, or K not a multiple of 8 without col2im:
// few_channels_direct_pays) only backward data; direct_mma (convolution_few_channels_mma.h: the
// same pass at stride 1 on mma.sync, the whole filter and a window of dy in shared memory, for
// C <= 32, groups 1, no dilation; `best`: few_channels_mma_pays) only backward data; stem_mma
// (convolution_stem_mma.h: the forward with at most 8 input channels on mma.sync, the reduction
// packed as (r, s, c) runs of staged rows of x; `best`: stem_mma_pays) the forward, without
// channel statistics, and the filter gradient (C < 8, K a multiple of 16 up to 64);
// grouped (convolution_grouped_nhwc.h: all three passes direct on the CUDA
// cores, for groups of 4, 8 or 16 channels each side; `best`: conv2d_tc_*_uses_grouped) given
// 16-byte aligned tensors; where a family cannot run, it runs mma.sync.
// wgmma_wide: the wgmma kernels with the 256-column tile wherever the GEMM has more than 128
// columns (forward and data; `best` takes it only for large, long reductions: the tests reach it
// on small shapes this way). wgmma_persistent: the wgmma kernels on persistent blocks (two an SM,
// each walking tiles; a 256-column tile stays a block a tile; `best` takes them for large layers
// of short reductions) whatever the layer. wgmma_halo: the forward and backward data of
// stride-1 filters with taps on halo tiles (each input pixel read once a channel slab, not once
// a tap: convolution_tc_wgmma_halo.cuh) wherever they fit (`best`: where they fit and the ring
// kernel would not split the reduction; f32 tensors, never split: wherever they fit).
// wgmma_stream: the forward and backward data of stride-1 1x1s of short reductions on streaming
// tiles (one block an SM, the filter resident, the outputs stored by the TMA:
// convolution_tc_wgmma_stream.cuh) wherever they fit (`best`: where they fill two thirds of the
// SMs).
enum class TcKernels {
  best,
  mma_sync,
  wgmma,
  col2im,
  wgmma_wide,
  wgmma_persistent,
  wgmma_halo,
  direct,
  direct_mma,
  stem_mma,
  grouped,
  wgmma_stream
};
// Whether `kernels` lets a pass take the wgmma kernels (best, or forced).
inline bool wgmma_allowed(TcKernels kernels) {
  return kernels == TcKernels::best || kernels == TcKernels::wgmma ||
         kernels == TcKernels::wgmma_wide || kernels == TcKernels::wgmma_persistent ||
         kernels == TcKernels::wgmma_halo || kernels == TcKernels::wgmma_stream;
}

// The forward's workspace with fused channel statistics (without them it takes none).
size_t conv2d_tc_forward_workspace(const Conv2dGeometry& g);
size_t conv2d_tc_backward_data_workspace(const Conv2dGeometry& g, TcType type);
size_t conv2d_tc_backward_filter_workspace(const Conv2dGeometry& g);

// y is written.
void conv2d_tc_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                       const TcEpilogue& epilogue, void* workspace, gpu::Stream stream,
                       TcKernels kernels = TcKernels::best);
// dx is written.
void conv2d_tc_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* w,
                             void* dx, void* workspace, gpu::Stream stream,
                             TcKernels kernels = TcKernels::best);
// dw (fp32, [K,R,S,C/groups]) += the filter gradient.
void conv2d_tc_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                               float* dw, void* workspace, gpu::Stream stream,
                               TcKernels kernels = TcKernels::best);

// Whether a pass of g runs the wgmma kernels on the current device (given 16-byte aligned
// tensors; misaligned ones take the mma.sync kernels).
bool conv2d_tc_forward_uses_wgmma(const Conv2dGeometry& g, TcKernels kernels = TcKernels::best);
bool conv2d_tc_backward_data_uses_wgmma(const Conv2dGeometry& g,
                                        TcKernels kernels = TcKernels::best);
bool conv2d_tc_backward_filter_uses_wgmma(const Conv2dGeometry& g,
                                          TcKernels kernels = TcKernels::best);
// Whether the forward (backward data) of g runs on the wgmma kernels' halo tiles on the current
// device; f32: f32 tensors in tf32 math (conv2d_*_nhwc).
bool conv2d_tc_forward_uses_halo(const Conv2dGeometry& g, TcKernels kernels, bool f32 = false);
bool conv2d_tc_backward_data_uses_halo(const Conv2dGeometry& g, TcKernels kernels,
                                       bool f32 = false);
// Whether the forward (without residual or channel statistics) or backward data of g runs on the
// wgmma kernels' streaming tiles on the current device; f32: f32 tensors in tf32 math.
bool conv2d_tc_forward_uses_stream(const Conv2dGeometry& g, TcKernels kernels, bool f32 = false);
bool conv2d_tc_backward_data_uses_stream(const Conv2dGeometry& g, TcKernels kernels,
                                         bool f32 = false);
// Whether backward data of g on `type` tensors runs the col2im kernels on the current device
// (given dy 16-byte aligned).
bool conv2d_tc_backward_data_uses_col2im(const Conv2dGeometry& g, TcType type,
                                         TcKernels kernels = TcKernels::best);
// Whether backward data of g on `type` tensors runs the direct few-channel kernel (any device and
// alignment).
bool conv2d_tc_backward_data_uses_direct(const Conv2dGeometry& g, TcType type,
                                         TcKernels kernels = TcKernels::best);
// `best`'s rule for the direct kernel, `col2im` saying whether col2im would run g: channels that
// are not a whole 16-byte vector (`vector` channels: 8 of 16 bits, 4 floats), at most 8 of them,
// or more from a K that is not a whole vector either where col2im does not run.
bool few_channels_direct_pays(const Conv2dGeometry& g, bool col2im, int vector);
// Whether backward data of g on `type` tensors runs the few-channel kernel on mma.sync (any
// device of compute capability 8.0 or more, any alignment).
bool conv2d_tc_backward_data_uses_direct_mma(const Conv2dGeometry& g, TcType type,
                                             TcKernels kernels = TcKernels::best);
// `best`'s rule for it (given that it fits): `vector` as above.
bool few_channels_mma_pays(const Conv2dGeometry& g, int vector);
// Whether the forward of g runs the few-input-channel kernel on mma.sync (any device of compute
// capability 8.0 or more; given y and the residual 4-byte aligned and no channel statistics).
bool conv2d_tc_forward_uses_stem(const Conv2dGeometry& g, TcKernels kernels = TcKernels::best);
// The same for the filter gradient (the stem's own kernel: given dy 16-byte aligned).
bool conv2d_tc_backward_filter_uses_stem(const Conv2dGeometry& g,
                                         TcKernels kernels = TcKernels::best);
// `best`'s rule for both (given that they fit).
bool stem_mma_pays(const Conv2dGeometry& g);
// Whether a pass of g runs the grouped direct kernels (any device; given 16-byte aligned
// tensors); `best` takes them where a pass reads few channels a group (forward: Cg = 4, or 8 at
// stride 1; data: Kg <= 8; filter: Cg = 4), the implicit GEMMs elsewhere.
bool conv2d_tc_forward_uses_grouped(const Conv2dGeometry& g, TcKernels kernels = TcKernels::best);
bool conv2d_tc_backward_data_uses_grouped(const Conv2dGeometry& g,
                                          TcKernels kernels = TcKernels::best);
bool conv2d_tc_backward_filter_uses_grouped(const Conv2dGeometry& g,
                                            TcKernels kernels = TcKernels::best);

}  // namespace crema::kernels::cuda
