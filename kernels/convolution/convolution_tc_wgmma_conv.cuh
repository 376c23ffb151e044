// The Problem of the wgmma forward and backward data (convolution_tc_wgmma.cuh's kernel runs it;
// convolution_tc_wgmma_sm90a.cu launches it): the units of the implicit GEMM (a tile, its part of
// a split reduction, its phase), the slabs the producer asks the TMA for, and the staged epilogue
// that hands each 8 channels of a GEMM row to an output stage (convolution_tc_wgmma_out.cuh),
// after summing a split reduction's parts across the blocks of a cluster. sm_90a files only, as
// convolution_tc_wgmma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc::wg {

// Where a unit works: its phase, its tile (grouped_tile's order over the phase's blocks) and its
// part of the reduction (slabs first .. first + count - 1).
struct Place {
  int phase, block, part;
  detail::TileCoord tile;
  int first, count;
};

// The GEMM C[rows, columns] = A[rows, inner] * B[columns, inner]^T: A K-major, its rows and
// slabs as `rows` says; B the flat K-major [columns, inner] matrix (the filter [K, R*S*C] or its
// transpose [C, R*S*K]), or (B_FROM_W: backward data of a 1x1 or at stride 1, 16-bit) the filter
// w [K, R*S, C] itself, read MN-major (a tap's [K, C] rows are the slab's inner indices, its
// channels the columns: no transposed copy). `out` finishes C. Units walk the parts, then the
// tiles (`blocks` of them a phase) in grouped_tile's order, then the phases. parts > 1: the
// reduction is split into parts of slabs_per_part slabs (the last shorter, or empty), the parts
// of a tile in one cluster of `parts` blocks, a block a unit (its rank the part), which sum
// their fp32 tiles in shared memory before the epilogue (reduce_parts). PHASES > 1: backward data's
// output phases at a stride in one launch (each its rows, its taps' columns of wt, its pixels of
// dx), where they have the same extent (the same map of dy).
template <int BN, class Out, int PHASES = 1, bool B_FROM_W = false>
struct ConvProblem {
  static constexpr bool kMnMajorA = false, kMnMajorB = B_FROM_W, kTransposes = false;
  static constexpr int kColumns = BN, kPhases = PHASES;
  Rows rows_of[PHASES];
  int columns, inner;
  Out out_of[PHASES];
  int blocks = 0;
  int parts = 1, slabs_per_part = 0;  // parts: at most 8 (a portable cluster)

  __device__ int units() const { return blocks * parts * PHASES; }
  __device__ Place locate(int unit) const {
    Place p;
    p.part = unit % parts;  // a cluster's blocks: one tile's parts
    p.block = unit / parts % blocks;
    p.phase = PHASES == 1 ? 0 : unit / parts / blocks;
    const Rows& r = rows_of[p.phase];
    p.tile = detail::grouped_tile(p.block, r.tiles, (columns + BN - 1) / BN, 8);
    p.first = p.part * slabs_per_part;
    p.count = parts == 1 ? r.slabs() : max(0, min(slabs_per_part, r.slabs() - p.first));
    return p;
  }
  __device__ int slabs(const Place& p) const { return p.count; }
  __device__ void fill(const Place& p, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_a, const CUtensorMap* map_b) const {
    const Rows& r = rows_of[p.phase];
    mbarrier_arrive_expect_tx(bar, r.a_bytes() + Ring<BN>::B_BYTES);
    r.load(stage, map_a, bar, p.first + slab, p.tile.m);
    load_b(r, p.first + slab, stage + Ring<BN>::A_BYTES, bar, map_b, p.tile.n);
  }
  // Asks for B's BN columns of column tile `tile_n` for slab s of `r`: piece s % channel_slabs of
  // tap s / channel_slabs.
  __device__ static void load_b(const Rows& r, int s, uint32_t dst, uint32_t bar,
                                const CUtensorMap* map_b, int tile_n) {
    load_b(r, s / r.channel_slabs, s % r.channel_slabs, dst, bar, map_b, tile_n);
  }
  // The same for tap `tap`'s channels piece * slab ..: BN rows of the flat matrix (its column
  // first_column + tap * channels + piece * slab: where a tap's channels end inside the slab, the
  // box runs into the next tap's, against A's zero-filled channels past them: they add nothing),
  // or (B_FROM_W) BN / 64 boxes of 64 channels x the piece's 64 output channels of the tap
  // (filter_map: zeros past K), one 64 x 64 box (8 KB) after the other.
  __device__ static void load_b(const Rows& r, int tap, int piece, uint32_t dst, uint32_t bar,
                                const CUtensorMap* map_b, int tile_n) {
    if constexpr (B_FROM_W) {
#pragma unroll
      for (int j = 0; j < BN / 64; ++j) {
        tma_load_3d(dst + 8192 * j, map_b, bar, tile_n * BN + 64 * j, tap, piece * r.slab);
      }
    } else {
      tma_load_2d(dst, map_b, bar, r.first_column + tap * r.channels + piece * r.slab, tile_n * BN);
    }
  }

  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3. The epilogue goes through shared
  // memory, so that global memory sees 16-byte accesses with consecutive lanes on consecutive
  // addresses (the fragments' 4-byte stores cover 16 bytes of a row a warp instruction, half of
  // each 32-byte sector): STAGED columns at a time, each warp parks its 16 rows in its scratch
  // (`staging`), and emit reads them back 64 columns at a time as 8 chunks of 8 channels a row.
  // A lane reads its chunk's two 16-byte halves in an order that alternates every 4 chunks: the
  // 8 lanes of one 16-byte access phase then cover all 32 banks once. Split (parts > 1):
  // reduce_parts. HALO: the rows are halo tiles' (Rows::at_halo).
  template <int STAGED, bool HALO = false>
  __device__ void store(const Place& p, int consumer, const float (&acc)[BN / 2],
                        float* staging) const {
    // Split launches run a block a unit (STAGED == BN: the drained ring holds the whole tile);
    // halo tiles never split. (Instantiated in persistent 128-column blocks, the path made them
    // spill.)
    if constexpr (!HALO && STAGED == BN) {
      if (parts > 1) {
        reduce_parts(p, consumer, acc, staging);
        return;
      }
    }
    constexpr int kPitch = STAGED + 8;
    const Targets targets = targets_of<HALO>(p, consumer);
#pragma unroll
    for (int round = 0; round < BN / STAGED; ++round) {
      __syncwarp();  // the lanes have read the scratch's last contents
      park<STAGED>(acc, round, staging);
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

  // Round `round`'s STAGED columns of the warp's 16 rows into its scratch, rows STAGED + 8 floats
  // apart (the pad puts the 8 rows of one fragment store on distinct banks).
  template <int STAGED>
  __device__ static void park(const float (&acc)[BN / 2], int round, float* staging) {
    const int lane = threadIdx.x % 32;
    constexpr int kPitch = STAGED + 8;
#pragma unroll
    for (int j = 0; j < STAGED / 8; ++j) {
      const int J = STAGED / 8 * round + j;
      float* at = staging + lane / 4 * kPitch + 8 * j + 2 * (lane % 4);
      *reinterpret_cast<float2*>(at) = make_float2(acc[4 * J], acc[4 * J + 1]);
      *reinterpret_cast<float2*>(at + 8 * kPitch) = make_float2(acc[4 * J + 2], acc[4 * J + 3]);
    }
  }

  // The epilogue of a split reduction, in a cluster of `parts` blocks (a block a unit, its rank
  // the unit's part): every block parks its whole fp32 tile in its scratch (the drained ring),
  // the cluster syncs, and each block finishes its share of the tile's chunks of 8 columns
  // (chunk c of each 64 columns: c % parts == part), each the sum of the parts' chunks read from
  // the cluster's shared memory (the same warp's scratch in every block) in rank order:
  // deterministic. A second sync keeps every block's scratch until all have read it.
  __device__ void reduce_parts(const Place& p, int consumer, const float (&acc)[BN / 2],
                               float* staging) const {
    constexpr int kPitch = BN + 8;
    const Targets targets = targets_of(p, consumer);
    const uint32_t scratch = uint32_t(__cvta_generic_to_shared(staging));
    park<BN>(acc, 0, staging);
    cluster_sync();
#pragma unroll
    for (int column0 = 0; column0 < BN; column0 += 64) {
      auto load = [&](int r, int chunk, float(&v)[8]) {
        const uint32_t at = scratch + uint32_t(r * kPitch + column0 + 8 * chunk) * 4;
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.0f;
        for (int q = 0; q < parts; ++q) {
          const float4 lo = load_cluster_f4(cluster_address(at, uint32_t(q)));
          const float4 hi = load_cluster_f4(cluster_address(at + 16, uint32_t(q)));
          v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
          v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
        }
      };
      emit(p, targets, consumer, column0, load, p.part, parts);
    }
    cluster_sync();
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
  template <bool HALO = false>
  __device__ Targets targets_of(const Place& p, int consumer) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const Rows& rows = rows_of[p.phase];
    Targets t;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int r = pass * kRowsAtOnce + lane / 8;
      const int i = consumer * 64 + warp * 16 + r;
      t.m[pass] = HALO ? rows.at_halo(p.tile.m, i) : rows.at(p.tile.m, i);
    }
    return t;
  }

  // The epilogue of columns column0 .. column0 + 63 of the warp's 16 rows: load(r, chunk, v) gives
  // row r's (of the 16) chunk as fp32 sums. Rows past the output and columns past the GEMM's are
  // skipped, and the chunks not of share `share` of `shares` (chunk c: c % shares; a split's
  // part); the channel sums: each warp's 16 rows in a fixed butterfly, one stats row per warp.
  template <class Load>
  __device__ void emit(const Place& p, const Targets& t, int consumer, int column0,
                       const Load& load, int share = 0, int shares = 1) const {
    const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
    const int chunk = lane % 8, n = p.tile.n * BN + column0 + 8 * chunk;
    const bool mine = n < columns && (column0 / 8 + chunk) % shares == share;
    const Out& out = out_of[p.phase];
    float sum[8], squares[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) sum[i] = 0.0f, squares[i] = 0.0f;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      // columns is a multiple of 8 (16-bit: the chunk is whole) or 4 (f32: Out stores its
      // second half only where it lies before `columns`).
      if (t.m[pass] < 0 || !mine) continue;
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
      if (lane < 8 && mine) {
        out.store_stats(p.tile.m * 8 + consumer * 4 + warp, n, sum, squares);
      }
    }
  }
};

// A 16-bit filter w [K, taps, C] as B's MN-major boxes: 64 channels x 1 tap x 64 output
// channels (ConvProblem's B_FROM_W).
inline CUtensorMap filter_map(MapType type, const void* w, int64_t K, int64_t taps, int64_t C) {
  const int64_t e = type.bytes;
  const cuuint64_t dims[3] = {cuuint64_t(C), cuuint64_t(taps), cuuint64_t(K)};
  const cuuint64_t strides[2] = {cuuint64_t(C * e), cuuint64_t(taps * C * e)};
  const cuuint32_t box[3] = {cuuint32_t(type.slab()), 1, 64};
  return tensor_map(type, w, 3, dims, strides, box);
}

}  // namespace crema::kernels::cuda::tc::wg
