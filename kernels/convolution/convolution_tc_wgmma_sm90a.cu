// Forward and backward data of convolutions on NHWC tensors on Hopper -- 16-bit (bf16, fp16) and
// f32 in tf32 math (conv2d_*_nhwc's tf32 passes, convolution_nhwc_cuda.cu): warpgroup MMA
// (wgmma) fed by the copy engine (TMA) through an mbarrier ring, as the GEMM's t4
// (kernels/gemm/gemm_wgmma_pipelined_sm90a.cu); the kernel and the ring are
// convolution_tc_wgmma.cuh's, this file their Problem for these two passes. Compiled for sm_90a
// alone (CMakeLists.txt); convolution_tc_cuda.cu (16-bit) and convolution_nhwc_cuda.cu (f32, tf32)
// call it on a device of compute capability 9.0 for the geometries it fits, the mma.sync kernels
// otherwise. Both are one implicit GEMM whose
// operands the TMA reads straight from the tensors, channels contiguous (K-major, as wgmma reads
// them: no repacking), the inner index (tap, channel):
//
//   forward  y[N*P*Q, K]   = sum over taps of x_tap[N*P*Q, C] * w_tap[K, C]^T, then bias,
//            residual, ReLU, one rounding (TcEpilogue), and optionally each warp's partial
//            channel sums of y and y^2
//   data     dx[N*H*W, C]  = sum over taps of dy_tap[N*H*W, K] * wt_tap[C, K]^T  (wt: w
//            transposed once into the workspace by convolution_tc_cuda.cu)
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
//   producer filling the next tile's stages during this one's epilogue (resident_blocks)
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
#include "kernels/convolution/convolution_tc_wgmma_out.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc {
namespace {

using wg::DataOut, wg::ForwardOut, wg::kBM, wg::kRowBytes, wg::kSlab;
using wg::Rows, wg::DataPhase, wg::DataGemms, wg::one_by_one, wg::channels_fit, wg::rows_fill_tiles,
    wg::forward_rows, wg::data_phase, wg::data_gemms, wg::image_map, wg::strided_map;

// Where a unit works: its phase, its tile (grouped_tile's order over the phase's blocks) and its
// part of the reduction (slabs first .. first + count - 1).
struct Place {
  int phase, block, part;
  detail::TileCoord tile;
  int first, count;
};

// The GEMM C[rows, columns] = A[rows, inner] * B[columns, inner]^T, both K-major: A's rows and
// slabs as `rows` says, B the flat [columns, inner] matrix (the filter [K, R*S*C] or its
// transpose [C, R*S*K]); `out` finishes C. Units walk the tiles (`blocks` of them a phase) in
// grouped_tile's order, then the parts, then the phases. parts > 1: the reduction is split into
// parts of slabs_per_part slabs (the last shorter, or empty), each unit storing its raw fp32 tile
// into `partial` ([phase][part][block][128][BN]), and finish_parts_kernel adds the parts in order
// and runs the epilogue. PHASES > 1: backward data's output phases at a stride in one launch
// (each its rows, its taps' columns of wt, its pixels of dx), where they have the same extent
// (the same map of dy).
template <int BN, class Out, int PHASES = 1>
struct ConvProblem {
  static constexpr bool kMnMajor = false;
  Rows rows_of[PHASES];
  int columns, inner;
  Out out_of[PHASES];
  int blocks = 0;
  int parts = 1, slabs_per_part = 0;
  float* partial = nullptr;

  __device__ int units() const { return blocks * parts * PHASES; }
  __device__ Place locate(int unit) const {
    Place p;
    p.block = unit % blocks;
    p.part = unit / blocks % parts;
    p.phase = PHASES == 1 ? 0 : unit / blocks / parts;
    const Rows& r = rows_of[p.phase];
    p.tile = detail::grouped_tile(p.block, r.tiles, (columns + BN - 1) / BN, 8);
    p.first = p.part * slabs_per_part;
    p.count = parts == 1 ? r.slabs() : max(0, min(slabs_per_part, r.slabs() - p.first));
    return p;
  }
  // Part `part` of the tile's (phase's) partial sums.
  __device__ float* partial_tile(const Place& p, int part) const {
    return partial + ((int64_t(p.phase) * parts + part) * blocks + p.block) * kBM * BN;
  }
  __device__ int slabs(const Place& p) const { return p.count; }
  __device__ void fill(const Place& p, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_a, const CUtensorMap* map_b) const {
    const Rows& r = rows_of[p.phase];
    wg::mbarrier_arrive_expect_tx(bar, r.a_bytes() + wg::Ring<BN>::B_BYTES);
    r.load(stage, map_a, bar, p.first + slab, p.tile.m);
    wg::tma_load_2d(stage + wg::Ring<BN>::A_BYTES, map_b, bar, r.b_column(p.first + slab),
                    p.tile.n * BN);
  }

  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3. Split (parts > 1): those pairs go
  // to the unit's partial tile as they are. Otherwise the epilogue goes through shared memory, so
  // that global memory sees 16-byte accesses with consecutive lanes on consecutive addresses (the
  // fragments' 4-byte stores cover 16 bytes of a row a warp instruction, half of each 32-byte
  // sector): STAGED columns at a time, each warp parks its 16 rows in its scratch (`staging`), and
  // emit reads them back 64 columns at a time as 8 chunks of 8 channels a row. A lane reads its
  // chunk's two 16-byte halves in an order that alternates every 4 chunks: the 8 lanes of one
  // 16-byte access phase then cover all 32 banks once.
  template <int STAGED>
  __device__ void store(const Place& p, int consumer, const float (&acc)[BN / 2],
                        float* staging) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    if (parts > 1) {
      const int row = consumer * 64 + warp * 16 + lane / 4;
      float* mine = partial_tile(p, p.part) + row * BN;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float* at = mine + 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(at) = make_float2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(at + 8 * BN) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
      }
      return;
    }
    constexpr int kPitch = STAGED + 8;
    const Targets targets = targets_of(p, consumer);
#pragma unroll
    for (int round = 0; round < BN / STAGED; ++round) {
      __syncwarp();  // the lanes have read the scratch's last contents
#pragma unroll
      for (int j = 0; j < STAGED / 8; ++j) {
        const int J = STAGED / 8 * round + j;
        float* at = staging + lane / 4 * kPitch + 8 * j + 2 * (lane % 4);
        *reinterpret_cast<float2*>(at) = make_float2(acc[4 * J], acc[4 * J + 1]);
        *reinterpret_cast<float2*>(at + 8 * kPitch) = make_float2(acc[4 * J + 2], acc[4 * J + 3]);
      }
      __syncwarp();
#pragma unroll
      for (int column0 = 0; column0 < STAGED; column0 += 64) {
        emit(p, targets, consumer, STAGED * round + column0, [&](int r, int chunk, float(&v)[8]) {
          const int first_half = chunk / 4 % 2;
          const float* src = staging + r * kPitch + column0 + 8 * chunk;
          const float4 first = *reinterpret_cast<const float4*>(src + 4 * first_half);
          const float4 second = *reinterpret_cast<const float4*>(src + 4 - 4 * first_half);
          const float4 lo = first_half ? second : first, hi = first_half ? first : second;
          v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
          v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        });
      }
    }
  }

  // The epilogue's lanes: a lane a chunk of 8 channels (lane % 8) of rows r = 4 pass + lane / 8
  // (pass 0..3) of the 16 of warp `threadIdx.x % 128 / 32`; each row's output pixel m (-1: none)
  // found once a tile (the index arithmetic, divisions by the image's sizes, costs more than the
  // stores it places; where Out puts the row is found again each round: holding it costs the
  // 64- and 128-column tiles spills at two blocks an SM).
  static constexpr int kRowsAtOnce = 4, kPasses = 16 / kRowsAtOnce;
  struct Targets {
    int m[kPasses];
  };
  __device__ Targets targets_of(const Place& p, int consumer) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const Rows& rows = rows_of[p.phase];
    Targets t;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int r = pass * kRowsAtOnce + lane / 8;
      t.m[pass] = rows.at(p.tile.m, consumer * 64 + warp * 16 + r);
    }
    return t;
  }

  // The epilogue of columns column0 .. column0 + 63 of the warp's 16 rows: load(r, chunk, v) gives
  // row r's (of the 16) chunk as fp32 sums. Rows past the output and columns past the GEMM's are
  // skipped; the channel sums: each warp's 16 rows in a fixed butterfly, one stats row per warp.
  template <class Load>
  __device__ void emit(const Place& p, const Targets& t, int consumer, int column0,
                       const Load& load) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int chunk = lane % 8, n = p.tile.n * BN + column0 + 8 * chunk;
    const Out& out = out_of[p.phase];
    float sum[8], squares[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) sum[i] = 0.0f, squares[i] = 0.0f;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      // columns is a multiple of 8 (16-bit: the chunk is whole) or 4 (f32: Out stores its
      // second half only where it lies before `columns`).
      if (t.m[pass] < 0 || n >= columns) continue;
      float v[8];
      load(pass * kRowsAtOnce + lane / 8, chunk, v);
      out.store(out.row(t.m[pass]), n, v);
      if constexpr (Out::kStats) {
#pragma unroll
        for (int i = 0; i < 8; ++i) sum[i] += v[i], squares[i] += v[i] * v[i];
      }
    }
    if constexpr (Out::kStats) {
      // The warp's 16 rows of each chunk: the lanes of one chunk, in a fixed butterfly.
#pragma unroll
      for (int mask = 8; mask < 32; mask *= 2) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], mask);
          squares[i] += __shfl_xor_sync(0xffffffffu, squares[i], mask);
        }
      }
      if (lane < 8 && n < columns) {
        out.store_stats(p.tile.m * 8 + consumer * 4 + warp, n, sum, squares);
      }
    }
  }
};

// The epilogue of a split reduction: block (b, 1, phase) finishes the phase's tile b, its 8
// warps as the product's consumers, each row chunk the sum of the parts in order
// (deterministic), then ConvProblem::emit as an unsplit unit would.
template <int BN, class Out, int PHASES>
__global__ void __launch_bounds__(wg::kThreads)
    finish_parts_kernel(const __grid_constant__ ConvProblem<BN, Out, PHASES> problem) {
  const int consumer = threadIdx.x / 128, warp = threadIdx.x % 128 / 32;
  const Place p =
      problem.locate(int(blockIdx.x) + int(blockIdx.z) * problem.blocks * problem.parts);
  const float* first = problem.partial_tile(p, 0);
  const int64_t part_stride = int64_t(problem.blocks) * kBM * BN;
  const auto targets = problem.targets_of(p, consumer);
  for (int column0 = 0; column0 < BN; column0 += 64) {
    problem.emit(p, targets, consumer, column0, [&](int r, int chunk, float(&v)[8]) {
      const float* at = first + int64_t(consumer * 64 + warp * 16 + r) * BN + column0 + 8 * chunk;
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.0f;
      for (int part = 0; part < problem.parts; ++part, at += part_stride) {
        const float4 lo = *reinterpret_cast<const float4*>(at);
        const float4 hi = *reinterpret_cast<const float4*>(at + 4);
        v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
        v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
      }
    });
  }
}

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

// How many persistent blocks an SM run `units` units of `slabs` slabs at BN columns (0: a block a
// unit). Persistent blocks walk units, their producer filling the next unit's stages under this
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
int resident_blocks(int64_t units, int slabs, int sms, int bn, bool forward, WgmmaLaunch how) {
  if (bn == 256) return 0;  // two 256-column blocks do not fit an SM (long reductions only)
  if (how == WgmmaLaunch::persistent) return 2;
  if (forward && bn == 128) return 0;
  return slabs <= 4 && units > 2 * int64_t(sms) ? 2 : 0;
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

// Runs the problem of PHASES phases (rows[i], out[i]: the same tiles, dy's map alike; one launch,
// the phase after the tile and the part) on the tile wgmma_tile_columns picks (WgmmaLaunch::wide:
// 256 wherever there are more than 128 columns), a block a unit or persistent (resident_blocks);
// with `partial` (room for partial_floats at 64 and 128 columns), a few tiles'
// long reduction split over more blocks (split_of).
template <class E, class Out, int PHASES>
void run(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows (&rows)[PHASES],
         int columns, int inner, const Out (&out)[PHASES], gpu::Stream stream, const char* what,
         WgmmaLaunch how, float* partial) {
  // The longest reduction sets the split; the shortest the tile (256 columns pay only where every
  // phase's reduction is long).
  int slabs = 0, shortest = rows[0].slabs();
  for (const Rows& r : rows)
    slabs = std::max(slabs, r.slabs()), shortest = std::min(shortest, r.slabs());
  auto go = [&](auto bn) {
    constexpr int BN = decltype(bn)::value;
    const CUtensorMap map_b = wg::matrix_map(type, b, columns, inner, BN);
    ConvProblem<BN, Out, PHASES> problem{};
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
    const int sms = multiprocessors();
    using Problem = ConvProblem<BN, Out, PHASES>;
    bool persistent = false;
    if constexpr (BN < 256) {
      persistent = resident_blocks(units, split.slabs_per_part, sms, BN, !Out::kData, how) == 2;
      if (persistent) {
        wg::launch<E, BN, Problem, 2>(map_a, map_b, problem, std::min<int64_t>(units, 2 * sms),
                                      stream, what);
      }
    }
    if (!persistent) wg::launch<E, BN>(map_a, map_b, problem, units, stream, what);
    if (split.parts > 1) {
      finish_parts_kernel<BN, Out, PHASES>
          <<<dim3(unsigned(blocks), 1, unsigned(PHASES)), wg::kThreads, 0, stream>>>(problem);
      gpu::check_launch(what);
    }
  };
  const int bn = how == WgmmaLaunch::wide && columns > 128
                     ? 256
                     : wgmma_tile_columns(int64_t(rows[0].tiles) * PHASES, columns, shortest,
                                          multiprocessors());
  if (bn == 256) {
    go(std::integral_constant<int, 256>{});
  } else if (bn == 128) {
    go(std::integral_constant<int, 128>{});
  } else {
    go(std::integral_constant<int, 64>{});
  }
}

// One phase (the forward, a 1x1's data, a data phase alone).
template <class E, class Out>
void run(const CUtensorMap& map_a, const void* b, wg::MapType type, const Rows& rows, int columns,
         int inner, const Out& out, gpu::Stream stream, const char* what, WgmmaLaunch how,
         float* partial) {
  const Rows one_rows[1] = {rows};
  const Out one_out[1] = {out};
  run<E, Out, 1>(map_a, b, type, one_rows, columns, inner, one_out, stream, what, how, partial);
}

// E: Bf16, F16 or float (tf32 math), whose map type is `type`.
template <class E, bool STATS>
void forward_typed(const Conv2dGeometry& g, wg::MapType type, const void* x, const void* w, void* y,
                   const TcEpilogue& ep, float* stats, gpu::Stream stream, WgmmaLaunch how,
                   float* partial) {
  const Rows rows = forward_rows(g, type.slab());
  const CUtensorMap map_a = rows.box_p == 0 ? wg::matrix_map(type, x, rows.M, g.C, kBM)
                            : one_by_one(g) ? strided_map(type, x, g, rows)
                                            : image_map(type, x, g.N, g.H, g.W, g.C, rows,
                                                        int(g.stride_h), int(g.stride_w));
  const ForwardOut<E, STATS> out{int(g.K),
                                 ep.bias,
                                 static_cast<const wg::Stored<E>*>(ep.residual),
                                 ep.relu,
                                 static_cast<wg::Stored<E>*>(y),
                                 stats};
  run<E>(
      map_a, w, type, rows, int(g.K), int(g.R * g.S * g.C), out, stream,
      std::is_same_v<E, float> ? "conv2d_forward_nhwc (wgmma, tf32)" : "conv2d_tc_forward (wgmma)",
      how, partial);
}

// A 1x1: one GEMM over dy's pixels (flat), each placed at its strided pixel of dx; a filter with
// taps: one GEMM per output phase (one at stride 1), each writing its own pixels of dx.
template <class E>
void data_typed(const Conv2dGeometry& g, wg::MapType type, const void* dy, const void* wt, void* dx,
                gpu::Stream stream, WgmmaLaunch how, float* partial) {
  const int P = int(g.P()), Q = int(g.Q()), K = int(g.K), C = int(g.C), H = int(g.H), W = int(g.W),
            stride_h = int(g.stride_h), stride_w = int(g.stride_w);
  auto* dxs = static_cast<wg::Stored<E>*>(dx);
  const char* what = std::is_same_v<E, float> ? "conv2d_backward_data_nhwc (wgmma, tf32)"
                                              : "conv2d_tc_backward_data (wgmma)";
  const DataGemms d = data_gemms(g, type.slab());
  if (d.phases.empty()) {  // a 1x1
    const DataOut<E> out{C, H, W, P, Q, stride_h, stride_w, 0, 0, stride_h, stride_w, dxs};
    run<E>(wg::matrix_map(type, dy, d.rows[0].M, K, kBM), wt, type, d.rows[0], C, K, out, stream,
           what, how, partial);
    return;
  }
  std::vector<DataOut<E>> outs;
  for (const DataPhase& p : d.phases) {
    outs.push_back(
        {C, H, W, p.h.extent, p.w.extent, stride_h, stride_w, p.h.first, p.w.first, 1, 1, dxs});
  }
  const int inner = int(g.R * g.S) * K;
  const std::vector<Rows>& rows = d.rows;
  if (d.together) {  // every phase's rows alike: one map of dy for all
    const CUtensorMap map = image_map(type, dy, g.N, P, Q, K, rows[0]);
    if (rows.size() == 4) {
      run<E, DataOut<E>, 4>(map, wt, type, {rows[0], rows[1], rows[2], rows[3]}, C, inner,
                            {outs[0], outs[1], outs[2], outs[3]}, stream, what, how, partial);
    } else {
      run<E, DataOut<E>, 2>(map, wt, type, {rows[0], rows[1]}, C, inner, {outs[0], outs[1]}, stream,
                            what, how, partial);
    }
    return;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    run<E>(image_map(type, dy, g.N, P, Q, K, rows[i]), wt, type, rows[i], C, inner, outs[i], stream,
           what, how, partial);
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

int wgmma_forward_stats_rows(const Conv2dGeometry& g) {
  return forward_rows(g, kSlab).tiles * 8;
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

void wgmma_backward_data(const Conv2dGeometry& g, TcType type, const void* dy, const void* wt,
                         void* dx, gpu::Stream stream, WgmmaLaunch how, void* partial) {
  auto* p = static_cast<float*>(partial);
  if (type == TcType::bf16) {
    data_typed<Bf16>(g, wg::map_type(type), dy, wt, dx, stream, how, p);
  } else {
    data_typed<F16>(g, wg::map_type(type), dy, wt, dx, stream, how, p);
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
  data_typed<float>(g, wg::kF32Map, dy, wt, dx, stream, how, nullptr);
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
