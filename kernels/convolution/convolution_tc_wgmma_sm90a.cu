// Forward and backward data of convolutions on NHWC tensors on Hopper -- 16-bit (bf16, fp16) and
// f32 in tf32 math (conv2d_*_nhwc's tf32 passes, convolution_nhwc_cuda.cu): warpgroup MMA
// (wgmma) fed by the copy engine (TMA) through an mbarrier ring, as the GEMM's t4
// (kernels/gemm/gemm_wgmma_pipelined_sm90a.cu); the kernel and the ring are
// convolution_tc_wgmma.cuh's, their Problem for these two passes convolution_tc_wgmma_conv.cuh's,
// this file the launches (tile width, split, persistence) and the entry points. Compiled for sm_90a
// alone (CMakeLists.txt); convolution_tc_cuda.cu (16-bit) and convolution_nhwc_cuda.cu (f32, tf32)
// call it on a device of compute capability 9.0 for the geometries it fits, the mma.sync kernels
// otherwise. Both are one implicit GEMM whose
// operands the TMA reads straight from the tensors, channels contiguous (K-major, as wgmma reads
// them: no repacking), the inner index (tap, channel):
//
//   forward  y[N*P*Q, K]   = sum over taps of x_tap[N*P*Q, C] * w_tap[K, C]^T, then bias,
//            residual, ReLU, one rounding (TcEpilogue), and optionally each warp's partial
//            channel sums of y and y^2
//   data     dx[N*H*W, C]  = sum over taps of dy_tap[N*H*W, K] * wt_tap[C, K]^T  (a 1x1 or a
//            stride-1 filter, 16-bit: w itself read MN-major; else wt, w transposed by phase
//            into the workspace by convolution_tc_cuda.cu)
//
// A 1x1 (no padding) is one tap: x's pixels (n, p*stride_h, q*stride_w) forward; backward data
// multiplies dy's pixels and its epilogue writes each one's stride_h x stride_w block of dx (the
// value, zeros around it). Any other filter: x_tap (dy_tap) is the tensor shifted by the tap's
// offset, zero outside the image (Rows, convolution_tc_wgmma_rows.cuh); forward at any stride
// (the TMA box reads every stride-th pixel and row), backward data one GEMM per output phase
// (convolution_tc_phase.h: dx's pixels h = first + stride i read dy at stride 1 with the phase's
// taps; one phase at stride 1).
// What fits (wgmma_*_fits): groups 1, C and K multiples of 16 bytes (8 16-bit channels, 4 f32
// ones: a tensor map's rows are whole 16-byte units, outputs whole 16-byte pieces), and the
// conditions on the strides and the image size in convolution_tc_wgmma.h.
//
//   block tile 128 x BN (BN 128; 64 when the GEMM has at most 64 columns or 128 would leave SMs
//   without a block; 256 for long reductions: `run`), k slab 128 bytes of
//   channels of one tap (64 16-bit, 32 f32): 4 wgmma m64nBNk16 (tf32: k8) a slab per warpgroup;
//   f32 tensors are read as stored and truncated to TF32 by the tensor cores (the mma.sync
//   kernels round them, cvt.rna); two blocks an SM, so that one block's epilogue runs under the
//   other's copies, and for large layers of at most 4 slabs (ResNet's 1x1s: the prologue and
//   epilogue are most of a tile's life) two persistent blocks an SM, each walking tiles with its
//   producer filling the next tile's stages during this one's epilogue (persistent_pays)
//
// A tile's rows are 128 pixels of the flat tensor (a stride-1 1x1) or whole output rows of one
// image (Rows): 87.5% of 128 at widths 56 and 28, 98% at 14; the rows past them hold stale data
// and are never stored. Rows and channels past the tensor are zero-filled by the TMA; the epilogue
// skips rows past the output and columns past the GEMM's. The channel sums: each warp's 16 rows
// in a fixed butterfly, then channel_stats_kernel over the warps in order: deterministic.
#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature; reached through cudart
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/convolution/convolution_tc_wgmma_conv.cuh"
#include "kernels/convolution/convolution_tc_wgmma_halo.cuh"
#include "kernels/convolution/convolution_tc_wgmma_out.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc {
namespace {

using wg::ConvProblem, wg::finish_parts_kernel;
using wg::DataOut, wg::ForwardOut, wg::kBM, wg::kRowBytes, wg::kSlab;
using wg::Rows, wg::DataPhase, wg::DataGemms, wg::one_by_one, wg::channels_fit, wg::rows_fill_tiles,
    wg::forward_rows, wg::data_phase, wg::data_gemms, wg::image_map, wg::strided_map;

// The SMs of the current device.
int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    throw DeviceError("convolution on wgmma: cannot read the SM count of the current device");
  }
  return count;
}

// How a reduction of `slabs` slabs over `blocks` tiles is split: only where the tiles fill at
// most half of a 132-SM GPU, into parts of at least 8 slabs, enough of them for about 256 blocks
// (two an SM), at most 8. Device-independent, so that the workspace is a function of the
// geometry. H200, 2026-11-27 (session 17, call 2), `crema bench conv-tc --math bf16`, us at 1 /
// 2 / 4 / 8 parts: 16 x 512 x 7 x 7 -> 512 3x3 (64 blocks, 72 slabs) forward 36.7 / 25.6 / 21.9 /
// 27.6, data 81.9 / 71.1 / 67.3 / 72.5; 160 -> 320 at 7 x 7 (40 blocks, 27 slabs) 16.6 / 15.0 /
// 14.4 / 18.5; but 1024 -> 256 1x1 at 14 x 14 (100 blocks, 16 slabs) 10.4 / 13.9 / 17.9 / 25.6.
struct Split {
  int parts, slabs_per_part;
};
Split split_of(int64_t blocks, int slabs) {
  int parts = 1;
  if (blocks <= 64) parts = int(std::min<int64_t>({(256 + blocks - 1) / blocks, slabs / 8, 8}));
  parts = std::max(parts, 1);
  const int per = (slabs + parts - 1) / parts;
  return {(slabs + per - 1) / per, per};
}

// Whether `units` units of `slabs` slabs at BN columns (64 or 128: two 256-column blocks do not
// fit an SM) run on two persistent blocks an SM rather than a block a unit. Persistent blocks walk
// units, their producer filling the next unit's stages under this
// one's epilogue: it pays where the epilogue is most of a unit's life, the reductions of at most
// 4 slabs (ResNet's 1x1s), two blocks an SM (3 stages at BN 64, 2 at 128) so that one block's
// epilogue also runs under the other's wgmmas. H200, 2026-11-27 (session 18, call 3),
// `crema bench conv-tc --math bf16`, ms a block a unit / one persistent block an SM / two:
// 1x1 256->64 at 56 x 56 batch 128 (data: 1 slab) 0.144 / 0.197 / 0.124, forward (4 slabs)
// 0.0719 / 0.0693 / 0.0665, 1024->256 at 14 x 14 data (4 slabs) 0.0555 / 0.0666 / 0.0535; but
// longer reductions lose: 1024->256 forward (16 slabs) 0.0366 / 0.0332 / 0.0433, 3x3 64->64 at
// 56 x 56 batch 64 (9 slabs) 0.0690 / 0.0847 / 0.0698. The forward at BN 128 stays a block a
// unit: its persistent build spills (ptxas: 36 to 68 bytes; the epilogue's 64 columns a round
// keep half the accumulators live) and lost in session 18's bf16 suite (call 5, against
// session 17's: 16,16,112,112 -> 96 1x1 1.17x the time, 256->128 at 56 1.10x, 24->144 1.09x).
bool persistent_pays(int64_t units, int slabs, int sms, int bn, bool forward, WgmmaLaunch how) {
  if (how == WgmmaLaunch::persistent) return true;
  if (forward && bn == 128) return false;
  return slabs <= 4 && units > 2 * int64_t(sms);
}

// The split of `phases` phases of tiles like rows[0]'s, the longest reduction of `slabs`.
Split split_at(const Rows& rows, int phases, int slabs, int columns, int bn) {
  return split_of(int64_t(rows.tiles) * ((columns + bn - 1) / bn) * phases, slabs);
}

// The fp32 floats the partial tiles of `phases` phases of `rows` (the longest `slabs`) x
// `columns` take at BN columns a tile (0: not split).
int64_t partial_floats(const Rows& rows, int phases, int slabs, int columns, int bn) {
  const Split split = split_at(rows, phases, slabs, columns, bn);
  const int64_t blocks = int64_t(rows.tiles) * ((columns + bn - 1) / bn) * phases;
  return split.parts > 1 ? split.parts * blocks * kBM * bn : 0;
}

// B's map: the flat [columns, inner] matrix in boxes of BN rows, or (B_FROM_W) w [K, taps, C]
// itself (`rows`: its taps and K).
template <bool B_FROM_W>
CUtensorMap b_map(wg::MapType type, const void* b, int columns, int inner, const Rows& rows,
                  int bn) {
  return B_FROM_W ? wg::filter_map(type, b, rows.channels, rows.taps, columns)
                  : wg::matrix_map(type, b, columns, inner, bn);
}

// Runs the problem of PHASES phases (rows[i], out[i]: the same tiles, dy's map alike; one launch,
// the phase after the tile and the part) on the tile wgmma_tile_columns picks (WgmmaLaunch::wide:
// 256 wherever there are more than 128 columns), a block a unit or persistent (persistent_pays);
// with `partial` (room for partial_floats at 64 and 128 columns), a few tiles'
// long reduction split over more blocks (split_of). B_FROM_W: b is w itself (ConvProblem).
template <class E, class Out, int PHASES, bool B_FROM_W = false>
void run(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows (&rows)[PHASES],
         int columns, int inner, const Out (&out)[PHASES], gpu::Stream stream, const char* what,
         WgmmaLaunch how, float* partial) {
  // The longest reduction sets the split; the shortest the tile (256 columns pay only where every
  // phase's reduction is long).
  int slabs = 0, shortest = rows[0].slabs();
  for (const Rows& r : rows)
    slabs = std::max(slabs, r.slabs()), shortest = std::min(shortest, r.slabs());
  const int sms = multiprocessors();
  auto go = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    const CUtensorMap map_b = b_map<B_FROM_W>(type, b, columns, inner, rows[0], BN);
    using Problem = ConvProblem<BN, Out, PHASES, B_FROM_W>;
    Problem problem{};
    for (int i = 0; i < PHASES; ++i) problem.rows_of[i] = rows[i], problem.out_of[i] = out[i];
    problem.columns = columns, problem.inner = inner;
    const int64_t blocks = int64_t(rows[0].tiles) * ((columns + BN - 1) / BN);
    const Split split = BN < 256 && partial != nullptr
                            ? split_at(rows[0], PHASES, slabs, columns, BN)
                            : Split{1, slabs};
    if (split.parts > 1) {
      problem.parts = split.parts, problem.slabs_per_part = split.slabs_per_part;
      problem.partial = partial;
    }
    problem.blocks = int(blocks);
    const int64_t units = blocks * split.parts * PHASES;
    bool persistent = false;
    if constexpr (BN < 256) {  // two 256-column blocks do not fit an SM
      persistent = persistent_pays(units, split.slabs_per_part, sms, BN, !Out::kData, how);
      if (persistent) {
        wg::launch<E, BN, Problem, 2>(map_a, map_b, problem, std::min<int64_t>(units, 2 * sms),
                                      stream, what);
      }
    }
    if (!persistent) wg::launch<E, BN>(map_a, map_b, problem, units, stream, what);
    if (split.parts > 1) {
      finish_parts_kernel<Problem>
          <<<dim3(unsigned(blocks), 1, unsigned(PHASES)), wg::kThreads, 0, stream>>>(problem);
      gpu::check_launch(what);
    }
  };
  const int bn = how == WgmmaLaunch::wide && columns > 128
                     ? 256
                     : wgmma_tile_columns(int64_t(rows[0].tiles) * PHASES, columns, shortest, sms);
  if (bn == 256) {
    go(std::integral_constant<int, 256>{});
  } else if (bn == 128) {
    go(std::integral_constant<int, 128>{});
  } else {
    go(std::integral_constant<int, 64>{});
  }
}

// One phase (the forward, a 1x1's data, a data phase alone).
template <class E, class Out, bool B_FROM_W = false>
void run(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows& rows, int columns,
         int inner, const Out& out, gpu::Stream stream, const char* what, WgmmaLaunch how,
         float* partial) {
  const Rows one_rows[1] = {rows};
  const Out one_out[1] = {out};
  run<E, Out, 1, B_FROM_W>(map_a, b, type, one_rows, columns, inner, one_out, stream, what, how,
                           partial);
}

// Whether halo tiles fit `rows` (a filter with taps, one phase at stride 1) x `columns` at every
// tile width a launch may pick (halo_tile_columns: 64 alone for at most 64 columns).
bool halo_fits_rows(const Rows& rows, int columns) {
  if (rows.box_p == 0 || rows.taps == 1) return false;
  const Rows halo = wg::halo_rows(rows);
  return wg::halo_fits(halo, 64) && (columns <= 64 || wg::halo_fits(halo, 128));
}

// Whether a launch `how` takes halo tiles where they fit (halo_fits_rows): forced, or automatic
// wherever the ring kernel would not split the reduction (the halo kernel never does; split_of:
// a layer of at most 64 blocks, with `can_split`: the split's workspace given, never for f32).
// H200, 2026-11-28 (session 19, call 2), `crema bench conv-tc --math bf16`, ms ring / halo: 3x3
// 64->64 at 56 x 56 batch 64 forward 0.0649 / 0.0573, data 0.0724 / 0.0642; 128->128 at 28 x 28
// batch 128 0.0772 / 0.0623, 0.0848 / 0.0704; 256->256 at 14 x 14 batch 128 (the ring's
// 256-column tile; the halo's 8 rows of 16 use 112 tile rows against the ring's 126) 0.0618 /
// 0.0583; 16 x 64 x 112 x 112 0.0645 / 0.0572; tf32 0.80-0.84x the ring's time.
bool halo_wanted(const Rows& rows, int columns, WgmmaLaunch how, bool can_split) {
  if (how == WgmmaLaunch::halo) return true;
  if (how != WgmmaLaunch::automatic) return false;
  if (!can_split) return true;
  const int bn = wgmma_tile_columns(rows.tiles, columns, rows.slabs(), multiprocessors());
  return split_of(int64_t(rows.tiles) * ((columns + bn - 1) / bn), rows.slabs()).parts == 1;
}

// The columns of a halo tile over `rows` (halo_rows's) x `columns`: 64 or 128 as
// wgmma_tile_columns picks (128 where it picks 256), or (`how` halo, forced) 128 wherever there
// are more than 64 columns (the tests reach it on small shapes).
int halo_tile_columns(const Rows& rows, int columns, WgmmaLaunch how) {
  const bool wide = how == WgmmaLaunch::halo ? columns > 64
                                             : wgmma_tile_columns(rows.tiles, columns, rows.slabs(),
                                                                  multiprocessors()) > 64;
  return wide ? 128 : 64;
}

// Runs one phase of a filter with taps at stride 1 on halo tiles (halo_fits_rows): A from
// `a` [N, height, width, a_channels] (x forward, dy data), B the [columns, inner] filter, on
// halo_tile_columns' tiles, wg::halo_blocks' blocks an SM.
template <class E, class Out, bool B_FROM_W = false>
void run_halo(const void* a, int64_t N, int64_t height, int64_t width, int64_t a_channels,
              const void* b, wg::MapType type, const Rows& ring_rows, int columns, int inner,
              const Out& out, gpu::Stream stream, const char* what, WgmmaLaunch how) {
  const Rows rows = wg::halo_rows(ring_rows);
  auto go = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    const wg::Halo halo = wg::halo_of(rows, BN, wg::halo_blocks(rows, BN));
    const CUtensorMap map_a = wg::halo_map(type, a, N, height, width, a_channels, halo);
    const CUtensorMap map_b = b_map<B_FROM_W>(type, b, columns, inner, rows, BN);
    ConvProblem<BN, Out, 1, B_FROM_W> problem{};
    problem.rows_of[0] = rows, problem.out_of[0] = out;
    problem.columns = columns, problem.inner = inner;
    problem.blocks = rows.tiles * ((columns + BN - 1) / BN);
    wg::launch_halo<E, BN>(map_a, map_b, problem, halo, problem.blocks, stream, what);
  };
  if (halo_tile_columns(rows, columns, how) == 64) {
    go(std::integral_constant<int, 64>{});
  } else {
    go(std::integral_constant<int, 128>{});
  }
}

// E: Bf16, F16 or float (tf32 math), whose map type is `type`.
template <class E, bool STATS>
void forward_typed(const Conv2dGeometry& g, wg::MapType type, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, float* stats, gpu::Stream stream, WgmmaLaunch how,
                   float* partial) {
  const Rows rows = forward_rows(g, type.slab());
  const char* what =
      std::is_same_v<E, float> ? "conv2d_forward_nhwc (wgmma, tf32)" : "conv2d_tc_forward (wgmma)";
  const ForwardOut<E, STATS> out{int(g.K),
                                 ep.bias,
                                 static_cast<const wg::Stored<E>*>(ep.residual),
                                 ep.relu,
                                 static_cast<wg::Stored<E>*>(y),
                                 stats};
  if (g.stride_h == 1 && g.stride_w == 1 && halo_fits_rows(rows, int(g.K)) &&
      halo_wanted(rows, int(g.K), how, partial != nullptr)) {
    run_halo<E>(x, g.N, g.H, g.W, g.C, w, type, rows, int(g.K), int(g.R * g.S * g.C), out, stream,
                what, how);
    return;
  }
  const CUtensorMap map_a = rows.box_p == 0 ? wg::matrix_map(type, x, rows.M, g.C, kBM)
                            : one_by_one(g) ? strided_map(type, x, g, rows)
                                            : image_map(type, x, g.N, g.H, g.W, g.C, rows,
                                                        int(g.stride_h), int(g.stride_w));
  run<E>(map_a, w, type, rows, int(g.K), int(g.R * g.S * g.C), out, stream, what, how, partial);
}

// A 1x1: one GEMM over dy's pixels (flat), each placed at its strided pixel of dx; a filter with
// taps: one GEMM per output phase (one at stride 1), each writing its own pixels of dx. b: wt, or
// (B_FROM_W: a 1x1 or stride 1, 16-bit; wgmma_backward_data_reads_w) w itself.
template <class E, bool B_FROM_W>
void data_typed(const Conv2dGeometry& g, wg::MapType type, const void* dy, const void* b, void* dx,
                gpu::Stream stream, WgmmaLaunch how, float* partial) {
  const int P = int(g.P()), Q = int(g.Q()), K = int(g.K), C = int(g.C), H = int(g.H), W = int(g.W),
            stride_h = int(g.stride_h), stride_w = int(g.stride_w);
  auto* dxs = static_cast<wg::Stored<E>*>(dx);
  const char* what = std::is_same_v<E, float> ? "conv2d_backward_data_nhwc (wgmma, tf32)"
                                              : "conv2d_tc_backward_data (wgmma)";
  const DataGemms d = data_gemms(g, type.slab());
  if (d.phases.empty()) {  // a 1x1
    const DataOut<E> out{C, H, W, P, Q, stride_h, stride_w, 0, 0, stride_h, stride_w, dxs};
    run<E, DataOut<E>, B_FROM_W>(wg::matrix_map(type, dy, d.rows[0].M, K, kBM), b, type, d.rows[0],
                                 C, K, out, stream, what, how, partial);
    return;
  }
  std::vector<DataOut<E>> outs;
  for (const DataPhase& p : d.phases) {
    outs.push_back(
        {C, H, W, p.h.extent, p.w.extent, stride_h, stride_w, p.h.first, p.w.first, 1, 1, dxs});
  }
  const int inner = int(g.R * g.S) * K;
  const std::vector<Rows>& rows = d.rows;
  if (stride_h == 1 && stride_w == 1 && halo_fits_rows(rows[0], C) &&
      halo_wanted(rows[0], C, how, partial != nullptr)) {  // one phase: all of dx
    run_halo<E, DataOut<E>, B_FROM_W>(dy, g.N, P, Q, K, b, type, rows[0], C, inner, outs[0], stream,
                                      what, how);
    return;
  }
  if constexpr (!B_FROM_W) {
    if (d.together) {  // every phase's rows alike: one map of dy for all
      const CUtensorMap map = image_map(type, dy, g.N, P, Q, K, rows[0]);
      if (rows.size() == 4) {
        run<E, DataOut<E>, 4>(map, b, type, {rows[0], rows[1], rows[2], rows[3]}, C, inner,
                              {outs[0], outs[1], outs[2], outs[3]}, stream, what, how, partial);
      } else {
        run<E, DataOut<E>, 2>(map, b, type, {rows[0], rows[1]}, C, inner, {outs[0], outs[1]},
                              stream, what, how, partial);
      }
      return;
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {  // B_FROM_W: the one phase
    run<E, DataOut<E>, B_FROM_W>(image_map(type, dy, g.N, P, Q, K, rows[i]), b, type, rows[i], C,
                                 inner, outs[i], stream, what, how, partial);
  }
}

}  // namespace

// A strided 1x1: a box holds whole output rows (Q <= 128), and the strided view's dimensions do
// not overlap (stride_w * Q <= stride_h * W: an output row's pixels span less than the step to
// the next; only an asymmetric stride can break it). Taps: whole output rows filling at least
// 96 of a tile's 128 rows, at any stride the TMA's element steps take (1 to 8, boxes of at most
// 256 pixels a dimension: Q * stride_w and box_p * stride_h).
bool wgmma_forward_fits(const Conv2dGeometry& g, int channel_multiple) {
  if (!channels_fit(g, channel_multiple)) return false;
  if (!one_by_one(g)) {
    // The TMA's element steps are 1 to 8 and its boxes at most 256 elements a dimension.
    const int P = int(g.P()), Q = int(g.Q());
    return rows_fill_tiles(int(g.N), P, Q) && g.stride_h <= 8 && g.stride_w <= 8 &&
           Q * g.stride_w <= 256 && std::min(kBM / Q, P) * g.stride_h <= 256;
  }
  return (g.stride_h == 1 && g.stride_w == 1) ||
         (g.Q() <= kBM && g.stride_w * g.Q() <= g.stride_h * g.W);
}

// A filter with taps: every output phase that has pixels has taps (one without would have to
// write zeros) and whole rows filling at least 96 of a tile's 128 (at stride 1: dx's H x W).
bool wgmma_backward_data_fits(const Conv2dGeometry& g, int channel_multiple) {
  if (!channels_fit(g, channel_multiple)) return false;
  if (one_by_one(g)) return true;
  for (int rho_h = 0; rho_h < g.stride_h; ++rho_h) {
    for (int rho_w = 0; rho_w < g.stride_w; ++rho_w) {
      const DataPhase d = data_phase(g, rho_h, rho_w);
      if (d.empty()) continue;
      if (!d.has_taps() || !rows_fill_tiles(int(g.N), d.h.extent, d.w.extent)) return false;
    }
  }
  return true;
}

// The channels of a 128-byte slab for `channel_multiple` channels in 16 bytes (64 16-bit, 32 f32).
int slab_of(int channel_multiple) {
  return kRowBytes / 16 * channel_multiple;
}

bool wgmma_forward_halo_fits(const Conv2dGeometry& g, int channel_multiple) {
  return wgmma_forward_fits(g, channel_multiple) && g.stride_h == 1 && g.stride_w == 1 &&
         halo_fits_rows(forward_rows(g, slab_of(channel_multiple)), int(g.K));
}

bool wgmma_backward_data_halo_fits(const Conv2dGeometry& g, int channel_multiple) {
  return wgmma_backward_data_fits(g, channel_multiple) && g.stride_h == 1 && g.stride_w == 1 &&
         !one_by_one(g) &&
         halo_fits_rows(data_gemms(g, slab_of(channel_multiple)).rows[0], int(g.C));
}

// 16-bit tensors (channel_multiple 8) split with the workspace the entry points are given; f32
// ones never.
bool wgmma_forward_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple) {
  return wgmma_forward_halo_fits(g, channel_multiple) &&
         halo_wanted(forward_rows(g, slab_of(channel_multiple)), int(g.K), how,
                     channel_multiple == 8);
}

bool wgmma_backward_data_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple) {
  return wgmma_backward_data_halo_fits(g, channel_multiple) &&
         halo_wanted(data_gemms(g, slab_of(channel_multiple)).rows[0], int(g.C), how,
                     channel_multiple == 8);
}

int wgmma_forward_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple) {
  if (!wgmma_forward_takes_halo(g, how, channel_multiple)) return 0;
  const Rows rows = wg::halo_rows(forward_rows(g, slab_of(channel_multiple)));
  return wg::halo_blocks(rows, halo_tile_columns(rows, int(g.K), how));
}

int wgmma_backward_data_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple) {
  if (!wgmma_backward_data_takes_halo(g, how, channel_multiple)) return 0;
  const Rows rows = wg::halo_rows(data_gemms(g, slab_of(channel_multiple)).rows[0]);
  return wg::halo_blocks(rows, halo_tile_columns(rows, int(g.C), how));
}

int wgmma_forward_stats_rows(const Conv2dGeometry& g, WgmmaLaunch how) {
  const Rows rows = forward_rows(g, kSlab);
  return (wgmma_forward_takes_halo(g, how) ? wg::halo_rows(rows).tiles : rows.tiles) * 8;
}

void wgmma_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                   const TcEpilogue& epilogue, float* stats, gpu::Stream stream, WgmmaLaunch how,
                   void* partial) {
  const bool with_stats = epilogue.sum != nullptr;
  const wg::MapType map = wg::map_type(type);
  auto* p = static_cast<float*>(partial);
  if (type == TcType::bf16) {
    with_stats ? forward_typed<Bf16, true>(g, map, x, w, y, epilogue, stats, stream, how, p)
               : forward_typed<Bf16, false>(g, map, x, w, y, epilogue, stats, stream, how, p);
  } else {
    with_stats ? forward_typed<F16, true>(g, map, x, w, y, epilogue, stats, stream, how, p)
               : forward_typed<F16, false>(g, map, x, w, y, epilogue, stats, stream, how, p);
  }
}

bool wgmma_backward_data_reads_w(const Conv2dGeometry& g) {
  return one_by_one(g) || (g.stride_h == 1 && g.stride_w == 1);
}

void wgmma_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* b,
                         bool b_is_w, void* dx, gpu::Stream stream, WgmmaLaunch how,
                         void* partial) {
  if (b_is_w && !wgmma_backward_data_reads_w(g)) {
    throw Error("conv2d_tc_backward_data (wgmma): a strided filter with taps reads wt, not w");
  }
  auto* p = static_cast<float*>(partial);
  const wg::MapType map = wg::map_type(type);
  if (type == TcType::bf16) {
    b_is_w ? data_typed<Bf16, true>(g, map, dy, b, dx, stream, how, p)
           : data_typed<Bf16, false>(g, map, dy, b, dx, stream, how, p);
  } else {
    b_is_w ? data_typed<F16, true>(g, map, dy, b, dx, stream, how, p)
           : data_typed<F16, false>(g, map, dy, b, dx, stream, how, p);
  }
}

// The largest partial tiles either tile width can split into (the width depends on the device).
size_t wgmma_forward_partial_bytes(const Conv2dGeometry& g) {
  if (!wgmma_forward_fits(g)) return 0;
  const Rows rows = forward_rows(g, kSlab);
  return size_t(std::max(partial_floats(rows, 1, rows.slabs(), int(g.K), 64),
                         partial_floats(rows, 1, rows.slabs(), int(g.K), 128))) *
         sizeof(float);
}

size_t wgmma_backward_data_partial_bytes(const Conv2dGeometry& g) {
  if (!wgmma_backward_data_fits(g)) return 0;
  const DataGemms d = data_gemms(g, kSlab);
  const int C = int(g.C);
  int64_t floats = 0;
  for (const Rows& rows : d.rows) {  // together: one launch of them all, the longest's slabs
    const int phases = d.together ? int(d.rows.size()) : 1;
    const int slabs = d.together ? d.slabs : rows.slabs();
    floats = std::max({floats, partial_floats(rows, phases, slabs, C, 64),
                       partial_floats(rows, phases, slabs, C, 128)});
    if (d.together) break;
  }
  return size_t(floats) * sizeof(float);
}

void wgmma_forward_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y,
                       const TcEpilogue& epilogue, gpu::Stream stream, WgmmaLaunch how) {
  if (epilogue.sum != nullptr || epilogue.sum_squares != nullptr) {
    throw Error("conv2d_forward_nhwc (wgmma, tf32): no channel statistics on f32 tensors");
  }
  forward_typed<float, false>(g, wg::kF32Map, x, w, y, epilogue, nullptr, stream, how, nullptr);
}

void wgmma_backward_data_f32(const Conv2dGeometry& g, const float* dy, const float* wt, float* dx,
                             gpu::Stream stream, WgmmaLaunch how) {
  data_typed<float, false>(g, wg::kF32Map, dy, wt, dx, stream, how, nullptr);
}

// The 256-column tile runs one block an SM with its epilogue after the ring drains: it pays where
// the reduction is long. H200, 2026-11-27 (session 17, call 1), `crema bench conv-tc --math bf16`,
// TFLOP/s at 64 / 128 / 256 columns: 3x3 256->256 at 28 x 28, batch 128 (36 slabs) 343 / 472 /
// 525, forward of 8 x 256 x 56 x 56 -> 256 315 / 409 / 446; but the 1x1 64->256 at 56 x 56,
// batch 128 (1 slab) 92 / 121 / 90 and 512->2048 at 7 x 7 (8 slabs) 333 / 418 / 380.
int wgmma_tile_columns(int64_t row_tiles, int columns, int slabs, int sms) {
  if (columns % 256 == 0 && slabs >= 18 && row_tiles * (columns / 256) >= sms) return 256;
  return columns > 64 && row_tiles * ((columns + 127) / 128) >= sms ? 128 : 64;
}

int wgmma_forward_tile_columns(const Conv2dGeometry& g, int sms) {
  const Rows rows = forward_rows(g, kSlab);
  return wgmma_tile_columns(rows.tiles, int(g.K), rows.slabs(), sms);
}

int wgmma_backward_data_tile_columns(const Conv2dGeometry& g, int sms) {
  const DataGemms d = data_gemms(g, kSlab);
  const int phases = d.together ? int(d.rows.size()) : 1;
  const int shortest = d.together ? d.shortest : d.rows[0].slabs();
  return wgmma_tile_columns(int64_t(d.rows[0].tiles) * phases, int(g.C), shortest, sms);
}

}  // namespace crema::kernels::cuda::tc
