// Forward and backward data of convolutions on NHWC tensors on Hopper -- 16-bit (bf16, fp16) and
// f32 in tf32 math (conv2d_*_nhwc's tf32 passes, convolution_nhwc_cuda.cu): warpgroup MMA
// (wgmma) fed by the copy engine (TMA) through an mbarrier ring, as the GEMM's t4
// (kernels/gemm/gemm_wgmma_pipelined_sm90a.cu); the kernel and the ring are
// convolution_tc_wgmma.cuh's, their Problem for these two passes convolution_tc_wgmma_conv.cuh's,
// this file the launches and the entry points; convolution_tc_wgmma_plan_sm90a.cu the plan (tile
// width, split, persistence, halo tiles) and what fits. Compiled for sm_90a
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
#include "kernels/convolution/convolution_tc_wgmma_launch.cuh"
#include "kernels/convolution/convolution_tc_wgmma_out.cuh"
#include "kernels/convolution/convolution_tc_wgmma_plan.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"
#include "kernels/convolution/convolution_tc_wgmma_stream.cuh"

namespace crema::kernels::cuda::tc {
namespace {

using plan::multiprocessors, plan::Split, plan::split_at, plan::split_into, plan::persistent_pays,
    plan::halo_fits_rows, plan::halo_wanted, plan::halo_tile_columns, plan::stream_fits,
    plan::stream_wanted, plan::stream_tile_columns;
using wg::ConvProblem;
using wg::DataOut, wg::ForwardOut, wg::kBM, wg::kRowBytes, wg::kSlab;
using wg::Rows, wg::DataPhase, wg::DataGemms, wg::one_by_one, wg::channels_fit, wg::rows_fill_tiles,
    wg::forward_rows, wg::data_phase, wg::data_gemms, wg::image_map, wg::strided_map;

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
// with `split`, a few tiles' long reduction split over more blocks (split_of), a cluster of
// them a tile, a block a unit (ConvProblem::reduce_parts: persistent blocks would wait at the
// cluster's barrier for a producer still walking units). B_FROM_W: b is w itself (ConvProblem).
template <class E, class Out, int PHASES, bool B_FROM_W = false>
void run(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows (&rows)[PHASES],
         int columns, int inner, const Out (&out)[PHASES], gpu::Stream stream, const char* what,
         WgmmaLaunch how, bool split_allowed) {
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
    Split split =
        BN < 256 && split_allowed ? split_at(rows[0], PHASES, slabs, columns, BN) : Split{1, slabs};
    // Every cluster at once: fewer parts where the device holds fewer clusters than the tiles
    // (H200, 2026-11-29, session 25, call 7, ncu: 16 x 512 x 7 x 7 -> 512 3x3 forward in 64
    // clusters of 4 against 62 held took two waves, 42.5 us against the unclustered launch's 20.0).
    while (split.parts > 1 &&
           blocks * PHASES > wg::max_active_clusters<E, BN, Problem>(split.parts, what)) {
      split = split_into(slabs, split.parts - 1);
    }
    problem.blocks = int(blocks);
    const int64_t units = blocks * split.parts * PHASES;
    if (split.parts > 1) {
      problem.parts = split.parts, problem.slabs_per_part = split.slabs_per_part;
      wg::launch<E, BN>(map_a, map_b, problem, units, stream, what, split.parts);
      return;
    }
    if constexpr (BN < 256) {  // two 256-column blocks do not fit an SM
      if (persistent_pays(units, split.slabs_per_part, sms, BN, !Out::kData, how)) {
        wg::launch<E, BN, Problem, 2>(map_a, map_b, problem, std::min<int64_t>(units, 2 * sms),
                                      stream, what);
        return;
      }
      // 16-bit only: tf32's deep ring is not measured.
      if constexpr (!std::is_same_v<E, float>) {
        if (wgmma_deep_ring_pays(units, slabs, sms, BN)) {
          wg::launch<E, BN, Problem, wg::kDeep>(map_a, map_b, problem, units, stream, what);
          return;
        }
      }
    }
    wg::launch<E, BN>(map_a, map_b, problem, units, stream, what);
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
         bool split_allowed) {
  const Rows one_rows[1] = {rows};
  const Out one_out[1] = {out};
  run<E, Out, 1, B_FROM_W>(map_a, b, type, one_rows, columns, inner, one_out, stream, what, how,
                           split_allowed);
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

// Runs a flat GEMM (a stride-1 1x1) of at most 8 slabs on streaming tiles (stream_fits): A
// through map_a, B from `b` (B_FROM_W: w itself), the output `out` [rows.M, columns] stored by the
// TMA with bias (null: none) and ReLU; one block an SM, a row tile's column tiles side by side.
template <class E, bool B_FROM_W = false>
void run_stream(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows& rows,
                int columns, int inner, void* out, const float* bias, bool relu, gpu::Stream stream,
                const char* what) {
  const int sms = multiprocessors();
  auto go = [&](auto bn, auto slabs) {
    constexpr int BN = decltype(bn)::value, SLABS = decltype(slabs)::value;
    const CUtensorMap map_b = b_map<B_FROM_W>(type, b, columns, inner, rows, BN);
    const CUtensorMap map_out = wg::matrix_map(type, out, rows.M, columns, 64);
    const wg::StreamWork work{rows, columns, (columns + BN - 1) / BN, bias, relu};
    const int per_column = std::max(1, std::min(rows.tiles, sms / work.column_tiles));
    const auto kernel = wg::stream_kernel<E, BN, SLABS, B_FROM_W>;
    constexpr int kBytes = wg::StreamRing<BN, SLABS>::SMEM_BYTES;
    detail::set_shared_memory_limit(kernel, kBytes, what);
    kernel<<<unsigned(per_column * work.column_tiles), wg::kBlockThreads, kBytes, stream>>>(
        map_a, map_b, map_out, work);
    gpu::check_launch(what);
  };
  // B's room: 1, 2, 4 or 8 slabs, at most kMost (stream_fits: 8 onto 64 columns, 4 onto 128, 2
  // onto 256).
  auto with_slabs = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    constexpr int kMost = BN == 64 ? 8 : BN == 128 ? 4 : 2, kFour = std::min(4, kMost);
    const int slabs = rows.slabs();
    if (slabs == 1) {
      go(bn, std::integral_constant<int, 1>{});
    } else if (slabs == 2 || kMost == 2) {
      go(bn, std::integral_constant<int, 2>{});
    } else if (slabs <= 4) {
      go(bn, std::integral_constant<int, kFour>{});
    } else {
      go(bn, std::integral_constant<int, kMost>{});
    }
  };
  const int bn = stream_tile_columns(rows, columns, sms);
  if (bn == 64) {
    with_slabs(std::integral_constant<int, 64>{});
  } else if (bn == 128) {
    with_slabs(std::integral_constant<int, 128>{});
  } else {
    with_slabs(std::integral_constant<int, 256>{});
  }
}

// E: Bf16, F16 or float (tf32 math), whose map type is `type`.
template <class E, bool STATS>
void forward_typed(const Conv2dGeometry& g, wg::MapType type, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, float* stats, gpu::Stream stream, WgmmaLaunch how,
                   bool split_allowed) {
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
      halo_wanted(rows, int(g.K), how, split_allowed)) {
    run_halo<E>(x, g.N, g.H, g.W, g.C, w, type, rows, int(g.K), int(g.R * g.S * g.C), out, stream,
                what, how);
    return;
  }
  if (!STATS && ep.residual == nullptr && stream_fits(rows, int(g.K), multiprocessors()) &&
      stream_wanted(rows, int(g.K), how, multiprocessors())) {
    run_stream<E>(wg::matrix_map(type, x, rows.M, g.C, kBM), w, type, rows, int(g.K), int(g.C), y,
                  ep.bias, ep.relu, stream, what);
    return;
  }
  const CUtensorMap map_a = rows.box_p == 0 ? wg::matrix_map(type, x, rows.M, g.C, kBM)
                            : one_by_one(g) ? strided_map(type, x, g, rows)
                                            : image_map(type, x, g.N, g.H, g.W, g.C, rows,
                                                        int(g.stride_h), int(g.stride_w));
  run<E>(map_a, w, type, rows, int(g.K), int(g.R * g.S * g.C), out, stream, what, how,
         split_allowed);
}

// A 1x1: one GEMM over dy's pixels (flat), each placed at its strided pixel of dx; a filter with
// taps: one GEMM per output phase (one at stride 1), each writing its own pixels of dx. b: wt, or
// (B_FROM_W: a 1x1 or stride 1, 16-bit; wgmma_backward_data_reads_w) w itself.
template <class E, bool B_FROM_W>
void data_typed(const Conv2dGeometry& g, wg::MapType type, const void* dy, const void* b, void* dx,
                gpu::Stream stream, WgmmaLaunch how, bool split_allowed) {
  const int P = int(g.P()), Q = int(g.Q()), K = int(g.K), C = int(g.C), H = int(g.H), W = int(g.W),
            stride_h = int(g.stride_h), stride_w = int(g.stride_w);
  auto* dxs = static_cast<wg::Stored<E>*>(dx);
  const char* what = std::is_same_v<E, float> ? "conv2d_backward_data_nhwc (wgmma, tf32)"
                                              : "conv2d_tc_backward_data (wgmma)";
  const DataGemms d = data_gemms(g, type.slab());
  if (d.phases.empty()) {  // a 1x1
    const CUtensorMap map_dy = wg::matrix_map(type, dy, d.rows[0].M, K, kBM);
    if (stride_h == 1 && stride_w == 1 && stream_fits(d.rows[0], C, multiprocessors()) &&
        stream_wanted(d.rows[0], C, how, multiprocessors())) {
      run_stream<E, B_FROM_W>(map_dy, b, type, d.rows[0], C, K, dx, nullptr, false, stream, what);
      return;
    }
    const DataOut<E> out{C, H, W, P, Q, stride_h, stride_w, 0, 0, stride_h, stride_w, dxs};
    run<E, DataOut<E>, B_FROM_W>(map_dy, b, type, d.rows[0], C, K, out, stream, what, how,
                                 split_allowed);
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
      halo_wanted(rows[0], C, how, split_allowed)) {  // one phase: all of dx
    run_halo<E, DataOut<E>, B_FROM_W>(dy, g.N, P, Q, K, b, type, rows[0], C, inner, outs[0], stream,
                                      what, how);
    return;
  }
  if constexpr (!B_FROM_W) {
    if (d.together) {  // every phase's rows alike: one map of dy for all
      const CUtensorMap map = image_map(type, dy, g.N, P, Q, K, rows[0]);
      if (rows.size() == 4) {
        run<E, DataOut<E>, 4>(map, b, type, {rows[0], rows[1], rows[2], rows[3]}, C, inner,
                              {outs[0], outs[1], outs[2], outs[3]}, stream, what, how,
                              split_allowed);
      } else {
        run<E, DataOut<E>, 2>(map, b, type, {rows[0], rows[1]}, C, inner, {outs[0], outs[1]},
                              stream, what, how, split_allowed);
      }
      return;
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {  // B_FROM_W: the one phase
    run<E, DataOut<E>, B_FROM_W>(image_map(type, dy, g.N, P, Q, K, rows[i]), b, type, rows[i], C,
                                 inner, outs[i], stream, what, how, split_allowed);
  }
}

}  // namespace

void wgmma_forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
                   const TcEpilogue& epilogue, float* stats, gpu::Stream stream, WgmmaLaunch how,
                   bool split) {
  const bool with_stats = epilogue.sum != nullptr;
  const wg::MapType map = wg::map_type(type);
  if (type == TcType::bf16) {
    with_stats ? forward_typed<Bf16, true>(g, map, x, w, y, epilogue, stats, stream, how, split)
               : forward_typed<Bf16, false>(g, map, x, w, y, epilogue, stats, stream, how, split);
  } else {
    with_stats ? forward_typed<F16, true>(g, map, x, w, y, epilogue, stats, stream, how, split)
               : forward_typed<F16, false>(g, map, x, w, y, epilogue, stats, stream, how, split);
  }
}

void wgmma_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* b,
                         bool b_is_w, void* dx, gpu::Stream stream, WgmmaLaunch how, bool split) {
  if (b_is_w && !wgmma_backward_data_reads_w(g)) {
    throw Error("conv2d_tc_backward_data (wgmma): a strided filter with taps reads wt, not w");
  }
  const wg::MapType map = wg::map_type(type);
  if (type == TcType::bf16) {
    b_is_w ? data_typed<Bf16, true>(g, map, dy, b, dx, stream, how, split)
           : data_typed<Bf16, false>(g, map, dy, b, dx, stream, how, split);
  } else {
    b_is_w ? data_typed<F16, true>(g, map, dy, b, dx, stream, how, split)
           : data_typed<F16, false>(g, map, dy, b, dx, stream, how, split);
  }
}

void wgmma_forward_f32(const Conv2dGeometry& g, const float* x, const float* w, float* y,
                       const TcEpilogue& epilogue, gpu::Stream stream, WgmmaLaunch how) {
  if (epilogue.sum != nullptr || epilogue.sum_squares != nullptr) {
    throw Error("conv2d_forward_nhwc (wgmma, tf32): no channel statistics on f32 tensors");
  }
  forward_typed<float, false>(g, wg::kF32Map, x, w, y, epilogue, nullptr, stream, how, false);
}

void wgmma_backward_data_f32(const Conv2dGeometry& g, const float* dy, const float* wt, float* dx,
                             gpu::Stream stream, WgmmaLaunch how) {
  data_typed<float, false>(g, wg::kF32Map, dy, wt, dx, stream, how, false);
}

}  // namespace crema::kernels::cuda::tc
