// The convolutions on 16-bit NHWC tensors that run on Hopper's wgmma and TMA (the 1x1 ones, the
// forward and data (by output phase) of the others on large enough images, the filter
// gradient of any at strides up to 4; forward and data also on f32 tensors in tf32 math:
// convolution_tc_wgmma_sm90a.cu and its plan, convolution_tc_wgmma_plan_sm90a.cu;
// convolution_tc_wgmma_filter_sm90a.cu), as the entry points of
// convolution_tc_cuda.cu, convolution_tc_filter_cuda.cu and (f32) convolution_nhwc_cuda.cu call
// them: the geometries they take,
// their workspaces, the three passes. Host code; the callers check the device (compute capability
// 9.0) and the pointers' alignment (16 bytes: x, w, dy and wt for the copy engine; y, residual and
// dx for the epilogue's 16-byte accesses).
#pragma once

#include "core/cuda_runtime.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::tc {

// Groups 1, C and K multiples of `channel_multiple` (the channels in 16 bytes: 8 for 16-bit
// tensors, 4 for f32 ones), and: a 1x1 filter without padding (forward with a stride: Q <= 128, a
// tile holding whole output rows, and stride_w * Q <= stride_h * W), or any other filter whose
// output rows (forward P x Q, data H x W; whole images a tile where one fills at most half) fill
// >= 96 of 128 tile rows (forward at strides up to 8 with Q * stride_w <= 256, data: each output
// phase's rows, every phase with taps).
bool wgmma_forward_fits(const Conv2dGeometry& g, int channel_multiple = 8);
bool wgmma_backward_data_fits(const Conv2dGeometry& g, int channel_multiple = 8);

// How the forward and backward data launch: as wgmma_tile_columns and the persistence and halo
// rules pick (automatic: TcKernels::best), or forced (the benchmark's rows, and the tests reach
// the rarer launches on small shapes): the ring kernel alone, never halo tiles (ring:
// TcKernels::wgmma), the 256-column tile wherever the GEMM has more than 128 columns
// (TcKernels::wgmma_wide), persistent blocks (TcKernels::wgmma_persistent), halo tiles
// wherever they fit (TcKernels::wgmma_halo; wgmma_*_halo_fits), or streaming tiles wherever they
// fit (TcKernels::wgmma_stream; wgmma_*_takes_stream; elsewhere the ring kernel as `ring`).
enum class WgmmaLaunch { automatic, ring, wide, persistent, halo, stream };
inline WgmmaLaunch wgmma_launch(TcKernels kernels) {
  return kernels == TcKernels::wgmma              ? WgmmaLaunch::ring
         : kernels == TcKernels::wgmma_wide       ? WgmmaLaunch::wide
         : kernels == TcKernels::wgmma_persistent ? WgmmaLaunch::persistent
         : kernels == TcKernels::wgmma_halo       ? WgmmaLaunch::halo
         : kernels == TcKernels::wgmma_stream     ? WgmmaLaunch::stream
                                                  : WgmmaLaunch::automatic;
}

// Whether halo tiles fit g's forward (backward data): a filter with taps at stride 1 (data: dx at
// stride 1) whose padded output rows (Q + (S - 1) dilation_w pixels; data: W + ...) fit a
// 128-row tile and fill at least 96 of its rows with output rows of one image, the halo
// (convolution_tc_wgmma_halo.cuh) fitting shared memory. And whether a launch `how` takes them:
// halo forced, or automatic where the ring kernel would not split the reduction (16-bit; f32
// never splits: wherever they fit).
bool wgmma_forward_halo_fits(const Conv2dGeometry& g, int channel_multiple = 8);
bool wgmma_backward_data_halo_fits(const Conv2dGeometry& g, int channel_multiple = 8);
bool wgmma_forward_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple = 8);
bool wgmma_backward_data_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple = 8);
// Whether the forward (backward data) of g runs on streaming tiles
// (convolution_tc_wgmma_stream.cuh: a stride-1 1x1 of at most 4 slabs -- 256 16-bit channels, 128
// f32 ones; 8 onto at most 64 channels -- in at most 8 column tiles; the forward without residual
// or channel statistics, `fused` saying whether they are asked) with launch `how`: forced, or
// automatic where the tiles fill at least two thirds of the SMs (needs a device).
bool wgmma_forward_takes_stream(const Conv2dGeometry& g, WgmmaLaunch how, bool fused,
                                int channel_multiple = 8);
bool wgmma_backward_data_takes_stream(const Conv2dGeometry& g, WgmmaLaunch how,
                                      int channel_multiple = 8);
// The blocks an SM those halo tiles run (3 at 64 columns where they fit, else 2; 0 where the
// launch takes no halo tiles).
int wgmma_forward_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple = 8);
int wgmma_backward_data_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple = 8);

// The rows of the forward's channel-sum partials ([rows][2][K] fp32 in the workspace): one per
// warp of each block of the launch `how` makes (automatic: on the current device, whose SM count
// the halo rule reads; the others need no device).
int wgmma_forward_stats_rows(const Conv2dGeometry& g, WgmmaLaunch how);

// y = the epilogue of conv(x, w), rounded once; with epilogue.sum set, the per-warp partial sums
// of y and y^2 into stats (channel_stats_kernel adds them up).
// how: the launch (WgmmaLaunch). split: where a layer's tiles fill at most half of the GPU, its
// reduction is split over a cluster of blocks a tile (wgmma_*_split_parts), their fp32 tiles
// summed in shared memory in a fixed order before the epilogue; false: never split.
void wgmma_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                   const TcEpilogue& epilogue, float* stats, gpu::Stream stream,
                   WgmmaLaunch how = WgmmaLaunch::automatic, bool split = false);
// dx = the transposed convolution of dy by w, written (a strided 1x1: the products at the strided
// pixels, zeros between them). b: w itself where b_is_w (wgmma_backward_data_reads_w: a 1x1 or
// stride 1, read MN-major as the GEMM's B, no transposed copy; 16-byte aligned), else wt
// [C, R, S (phase order), K], w transposed.
void wgmma_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* b,
                         bool b_is_w, void* dx, gpu::Stream stream,
                         WgmmaLaunch how = WgmmaLaunch::automatic, bool split = false);
// Whether the 16-bit backward data can read w itself (a 1x1, or a filter at stride 1: taps in
// w's order); strided filters with taps read w transposed by phase.
bool wgmma_backward_data_reads_w(const Conv2dGeometry& g);
// The parts (blocks of a cluster) the automatic launch of g's 16-bit forward and backward data
// (its longest phase) splits each tile's reduction into on a GPU of `sms` SMs (1: no split).
int wgmma_forward_split_parts(const Conv2dGeometry& g, int sms);
int wgmma_backward_data_split_parts(const Conv2dGeometry& g, int sms);
// The columns of a block's tile for a GEMM of `row_tiles` 128-row tiles, `columns` columns and
// `slabs` 128-byte slabs of reduction on a GPU of `sms` SMs: 256 for long reductions (at least
// 18 slabs) over a multiple of 256 columns that still give every SM a block, else 128 where
// 128-column tiles give every SM a block, else 64.
int wgmma_tile_columns(int64_t row_tiles, int columns, int slabs, int sms);
// Whether an unsplit, non-persistent 16-bit launch of `units` units of `slabs` slabs at BN
// columns runs one block an SM with a deep ring (as many stages as fit the SM: 9 at 64 columns, 7
// at 128) rather than two with 96 KB each: where every block has an SM of its own anyway (units
// <= sms) and its reduction is longer than the 96 KB ring (4 stages at 64 columns, 3 at 128).
bool wgmma_deep_ring_pays(int64_t units, int slabs, int sms, int bn);
// Whether the automatic launch of g's 16-bit forward (backward data: its first launch) takes the
// deep ring on a GPU of `sms` SMs (no halo tiles, no split, not persistent; needs a device for
// the halo rule).
bool wgmma_forward_deep_ring(const Conv2dGeometry& g, int sms);
bool wgmma_backward_data_deep_ring(const Conv2dGeometry& g, int sms);
// The tile the forward (backward data: its one launch of phases, or else its first phase) of g
// takes on a GPU of `sms` SMs.
int wgmma_forward_tile_columns(const Conv2dGeometry& g, int sms);
int wgmma_backward_data_tile_columns(const Conv2dGeometry& g, int sms);

// The same two passes on f32 tensors in tf32 math (conv2d_forward_nhwc and
// conv2d_backward_data_nhwc with GemmMath::tf32 call them where wgmma_*_fits(g, 4)): the
// operands as stored, truncated to TF32 by the tensor cores, fp32 sums, no rounding at the store.
// Forward: y = act(conv(x, w) + bias + residual) (residual: f32 [N,P,Q,K] or null; no channel
// statistics). Data: wt [C, R, S, K] is w transposed with its taps in phase order
// (transpose_filter_phase_order; plain [C, R, S, K] at stride 1 and for a 1x1).
void wgmma_forward_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y,
                       const TcEpilogue& epilogue, gpu::Stream stream,
                       WgmmaLaunch how = WgmmaLaunch::automatic);
void wgmma_backward_data_f32(const Conv2dGeometry& g, const float* dy, const float* wt, float* dx,
                             gpu::Stream stream, WgmmaLaunch how = WgmmaLaunch::automatic);
// ep.sum[k], ep.sum_squares[k] = the sums over `rows` of stats [rows][2][K] (per-warp or
// per-block partials of y and y^2), rows added in order (deterministic); queued on `stream`
// (convolution_tc_cuda.cu; the depthwise forward's statistics too).
void sum_channel_stats(const float* stats, int rows, int K, const TcEpilogue& ep,
                       gpu::Stream stream);
// dw[g*Kg + k, r, s, c] += the sum over slices, in order, of partial[slice][g][r*S + s][c][k]
// (fp32; each tap's rows Cp >= Cg channels apart): the filter gradients' slice sums, 16-bit
// (convolution_tc_filter_cuda.cu) and f32 NHWC (convolution_nhwc_cuda.cu), queued on `stream`.
void sum_filter_slices(const float* partial, int slices, int G, int Kg, int RS, int Cg, int Cp,
                       float* dw, gpu::Stream stream);
// Groups 1, strides up to 8 (any filter, padding and dilation whose im2col corners -pad and
// pad - (taps - 1) * dilation lie within [-128, 127]), C and K multiples of `channel_multiple`
// (16 bytes: 8 for 16-bit tensors, 4 for f32 ones).
bool wgmma_backward_filter_fits(const Conv2dGeometry& g, int channel_multiple = 8);
// Whether the wgmma filter gradient beats mma.sync (TcKernels::best, 16-bit and tf32): a 1x1
// without padding, two taps a tile, or C >= 32 and K >= 128 (convolution_tc_filter_cuda.cu).
bool wgmma_backward_filter_pays(const Conv2dGeometry& g);
// Whether the filter gradient puts two taps in one 128-row tile (x with 64 channels and a filter
// of taps: each tap's product alone would be 64 rows, half a tile).
bool wgmma_backward_filter_pairs_taps(const Conv2dGeometry& g);
// The workspace wgmma_backward_filter (f32: wgmma_backward_filter_f32) needs: its groups'
// partials (each dw's size in fp32) where the cut has more than one cluster a tile, else 0.
size_t wgmma_backward_filter_workspace(const Conv2dGeometry& g, bool f32 = false);
// The blocks a cluster of the cut (the slices whose sums one cluster adds; tests).
int wgmma_backward_filter_cluster(const Conv2dGeometry& g, bool f32 = false);
// dw[k][r][s][c] += the sum over N*P*Q of dy[npq, k] * x_rs[npq, c] (fp32; x_rs: x read at tap
// (r, s)), summed in a fixed order (deterministic); `workspace`: wgmma_backward_filter_workspace's
// bytes (16-byte aligned ones, and dw, take 16-byte accesses; 4-byte aligned ones, scalar).
void wgmma_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                           float* dw, void* workspace, gpu::Stream stream);
// The same on f32 tensors in tf32 math (conv2d_backward_filter_nhwc where
// wgmma_backward_filter_fits(g, 4) and x, dy are 16-byte aligned): each operand rounded to TF32
// (cvt.rna, as the mma.sync kernels), exact products, fp32 sums.
void wgmma_backward_filter_f32(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                               void* workspace, gpu::Stream stream);

}  // namespace crema::kernels::cuda::tc
