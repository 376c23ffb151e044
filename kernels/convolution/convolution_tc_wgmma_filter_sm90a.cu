// The filter gradient of the convolutions on NHWC tensors on Hopper: wgmma fed by TMA -- 16-bit
// tensors on convolution_tc_wgmma.cuh's kernel and ring (this file its Problem), f32 tensors in
// tf32 math on this file's own kernel, which transposes each slab into K-major tiles first (below,
// "f32 in tf32"). Compiled for sm_90a alone (CMakeLists.txt); convolution_tc_filter_cuda.cu
// (16-bit) and convolution_nhwc_cuda.cu (f32) call it on a device of compute capability 9.0 for the
// geometries it fits (wgmma_backward_filter_fits), the mma.sync kernels otherwise.
//
//   dw[K, r, s, C] += dy[N*P*Q, K]^T * x_rs[N*P*Q, C]   (fp32), one GEMM per tap (r, s), where
//   x_rs[n, p, q] = x[n, stride_h p + r*dil_h - pad_h, stride_w q + s*dil_w - pad_w] (zero
//   outside the image)
//
// The inner index N*P*Q is the outer index of both tensors: the operands are MN-major, a box of
// 64 channels x 64 pixels lands as 64 rows (pixels) of 128 bytes (channels), and the wgmma's
// transpose immediates read it as such (convolution_tc_wgmma.cuh). The GEMM's rows are the
// tensor with more channels (R = dy and rows k, or R = x and rows c), its columns the other (S), so
// that a 64-channel side does not leave half of the 128-row tile empty:
//
//   D[i, j] = sum over the slice's pixels of R[pixel, i] * S[pixel, j]   (tile 128 x BN, BN = 128,
//             or 64 when S has at most 64 channels)
//
// Slabs of 64 consecutive output positions of N*P*Q, read flat from both tensors: dy [N*P*Q, K] as
// a matrix (a 2-D map), x at the tap's pixel of each position -- through an im2col map (the TMA
// walks the 64 positions from the slab's first, wrapping at the end of a row and of an image, and
// reads x at position + the tap's offset, zeros over the padding and past the last image), or,
// for a 1x1 at stride 1 without padding, as a matrix too. Positions past N*P*Q are zeros in dy:
// they add nothing. Each block has one tap, except:
//
// Two taps a tile where x has 64 channels (and the filter taps): one tap's product is only 64
// rows (64 x J), so the tile's rows are x at two taps instead, box 0 = x at tap t, box 1 = x at
// tap t+1 (R = x, rows c twice), B = dy's BN channels loaded once for both; warpgroup 0 computes
// tap t's 64 x BN block, warpgroup 1 tap t+1's, each summed into its own tap of dw. With an odd
// tap count the last tile's box 1 is not asked for (nor its bytes expected): warpgroup 1
// multiplies stale shared memory and its half of the tile is never added.
//
// The slabs are cut into slices, one block per (tile, tap or tap pair, slice), and the slices of
// a unit into clusters of up to 8 consecutive blocks (filter_plan's cost model picks both). A
// block parks its fp32 D in its shared memory in dw's orientation (output channel outer, channel
// inner); the cluster syncs, and each block adds its share of the tile over the cluster's blocks
// in rank order, reading their shared memory (DSMEM), into dw (+=) -- or, where a unit has more
// than one cluster (groups), into the group's partial [group][K][R][S][C] that sum_groups_kernel
// then adds to dw in group order. Deterministic, no float atomics. Channels past C or K are
// zero-filled by the TMA. What fits: groups 1, strides up to 8, C and K multiples of 8 (f32: 4),
// the im2col corners (-pad, pad - (taps - 1) * dilation) within [-128, 127].
//
// f32 in tf32: tf32 wgmma reads K-major operands only (no transpose immediates), and here both
// operands have the reduction index N*P*Q outermost. The TMA lands the same MN-major boxes, each
// 32 f32 channels x 32 positions (4096 bytes: a slab is 32 positions, so that a K-major row of
// them is 128 bytes), which are rewritten as K-major tiles -- row m = channel m, its 32 positions
// 128B-swizzled, the box at the same offset -- rounding every value to TF32 on the way (cvt.rna,
// as the mma.sync kernels do: the tensor cores would truncate) before the consumers run wgmma
// m64nBNk8 on them. Two forms, by measurement (H200, 2026-11-28, session 22, call 7, ms in the
// same call): at 128 columns tf32_filter_kernel, whose third warpgroup, the transposers, writes
// each stage of a raw ring into a second ring, one block an SM (3x3 128@28 0.130 against the
// other form's 0.136, 1x1 2048 -> 512 at 7 0.056 against 0.084); at 64 columns the ring kernel
// of the 16-bit passes, its consumers transposing each stage in place (FilterProblem::transpose),
// two blocks an SM (the paired 64@56 0.172 against 0.196). The slices, clusters, groups and
// epilogue as above.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::tc {
namespace {

using wg::kBM, wg::kRowBytes;

// Two blocks an SM on an H100 or H200 (132 SMs; f32: one, kTf32Blocks); clusters of at most 8
// (the portable size).
constexpr int kTargetBlocks = 264, kTf32Blocks = 132;
constexpr int kMinPositionsPerSlice = 512;
constexpr int kMaxCluster = 8;

// The cut's cost model, in microseconds (H200 estimates, not tuned per shape): a slab of a
// 128 x 128 tile (2 x 128 x 128 x 64 flops) takes a block sharing its SM with another about 0.75
// us (0.37 at 64 columns); a block has about kEpilogueSlabs slabs' worth of pipeline fill, store
// and cluster sum on top; a round of at most kTargetBlocks / 2 blocks runs one an SM, each
// kLoneRound of a shared round's time (f32: blocks run one an SM anyway, a lone round costs a
// whole one); each group reads and writes dw's size once (dw += its sum,
// or its partial written and read back) at about 3 TB/s, and more than one group costs the sum's
// launch, about kSumLaunchUs.
constexpr double kEpilogueSlabs = 3.0, kLoneRound = 0.75, kPartialBytesPerUs = 3.0e6;
constexpr double kSumLaunchUs = 4.0;

struct Cut {
  int cluster, groups;  // slices = cluster x groups
};

// The cheapest cut of `slabs` slabs for `units` blocks a slice, `slab_us` a slab, dw
// `filter_bytes`, at most `most` slices. Fewer slices leave SMs idle or a second round nearly
// empty (256@14 3x3: 36 units x 8 slices = 288 blocks, 24 of them a round of their own); more
// groups move dw's bytes again.
Cut cheapest_cut(int64_t units, int64_t slabs, double slab_us, double filter_bytes, int64_t most,
                 const std::array<int, kMaxCluster + 1>& slots, double lone_round) {
  Cut best{1, 1};
  double best_us = -1.0;
  for (int cluster = 1; cluster <= kMaxCluster; ++cluster) {
    if (slots[size_t(cluster)] < cluster) continue;  // no cluster of that size fits
    const int64_t resident = slots[size_t(cluster)];
    for (int64_t groups = 1; groups * cluster <= most || (groups == 1 && cluster == 1); ++groups) {
      const int64_t slices = groups * cluster, length = (slabs + slices - 1) / slices;
      const int64_t blocks = units * slices, full = blocks / resident;
      const int64_t rest = blocks % resident;
      const double rounds = double(full) + (rest == 0              ? 0.0
                                            : rest <= resident / 2 ? lone_round
                                                                   : 1.0);
      const double us = rounds * (double(length) + kEpilogueSlabs) * slab_us +
                        double(groups) * 2.0 * filter_bytes / kPartialBytesPerUs +
                        (groups > 1 ? kSumLaunchUs : 0.0);
      if (best_us < 0.0 || us < best_us) best = {cluster, int(groups)}, best_us = us;
    }
  }
  return best;
}

// Unit u (= blockIdx.x): rank u % cluster in its cluster, block x = u / cluster % blocks_x (tile
// + tiles * slot), group u / cluster / blocks_x, slice group * cluster + rank: D's 128 x BN tile of
// one tap (slot; paired, taps 2 slot and 2 slot + 1, one a warpgroup) over the slice's slabs.
// IM2COL: x through the im2col map (else a matrix, like dy).
template <class E, int BN, bool IM2COL>
struct FilterProblem {
  // A box: 128 bytes of channels (64 16-bit ones, 32 f32 ones) x a slab's positions (64; f32 32,
  // so that the transposed rows are 128 bytes of positions too). The 16-bit wgmmas read the boxes
  // MN-major; f32's are made K-major first: at 64 columns in place by the consumers of
  // convolution_tc_wgmma.cuh's kernel (transpose), at 128 by tf32_filter_kernel's transposers.
  static constexpr bool kF32 = std::is_same_v<E, float>;
  static constexpr bool kMnMajorA = !kF32, kMnMajorB = !kF32, kTransposes = kF32;
  static constexpr int kChannels = kF32 ? 32 : 64, kPositions = kF32 ? 32 : 64;
  static constexpr uint32_t kBoxBytes = kF32 ? 4096 : 8192;
  // The tile parked in shared memory in dw's orientation, T[o][n]: o the output channel, n the
  // channel (paired: 64 x the warpgroup + the channel), `pitch` floats a row (the padding keeps
  // the fragments' stores on distinct banks).
  static constexpr int kPitchDy = BN + 8, kPitchX = kBM + 4;
  int I, J, tiles, tiles_j, length, slabs_all;
  // dw [K][taps][C] (+= the sums: `groups` 1) or the groups' partials, each dw's size.
  float* dw;
  float* partial;
  bool vector;  // the output (dw, or the workspace's partials) 16-byte aligned: float4 accesses
  // The output positions (P*Q an image, Q a row), x's window corners and steps, the filter.
  int PQ, Q, lower_h, lower_w, stride_h, stride_w, taps, S, dil_h, dil_w;
  bool rows_are_dy, paired;
  int blocks_x, cluster, groups;

  __device__ int units() const { return blocks_x * cluster * groups; }

  struct Where {
    int i0, j0, group, begin, tap;
    uint16_t off_h, off_w, off_h1, off_w1;  // x's offsets: the tap's (paired: and tap + 1's)
  };
  __device__ Where locate(int unit) const {
    const int rank = unit % cluster, x = unit / cluster % blocks_x;
    const int tile = x % tiles, slot = x / tiles;
    Where w;
    w.group = unit / cluster / blocks_x;
    w.i0 = tile / tiles_j * kBM, w.j0 = tile % tiles_j * BN;
    w.begin = (w.group * cluster + rank) * length, w.tap = paired ? 2 * slot : slot;
    w.off_h = uint16_t(w.tap / S * dil_h), w.off_w = uint16_t(w.tap % S * dil_w);
    const int next = w.tap + 1;  // paired: warpgroup 1's tap (used only where < taps)
    w.off_h1 = uint16_t(next / S * dil_h), w.off_w1 = uint16_t(next % S * dil_w);
    return w;
  }
  // The cut's last slices may hold no slab: D stays zero, the block still adds it.
  __device__ int slabs(const Where& w) const { return max(0, min(slabs_all - w.begin, length)); }
  // A: channels i0 .. i0+127 of R, each warpgroup's 64 in 64 / kChannels boxes (paired: x's 64
  // channels at taps tap and tap + 1), B: channels j0 .. j0+BN-1 of S in BN / kChannels boxes; a
  // box kPositions deep, kBoxBytes, box b of a half or of B b boxes on. A box that would lie
  // wholly past the channels (paired: past the last tap) is not asked for: its stale rows or
  // columns of D are never stored.
  __device__ void fill(const Where& w, int slab, uint32_t stage, uint32_t bar,
                       const CUtensorMap* map_r, const CUtensorMap* map_s) const {
    constexpr int kPerHalf = 64 / kChannels;
    auto a_box = [&](int half, int q) {
      return paired ? half == 0 || w.tap + 1 < taps : w.i0 + 64 * half + kChannels * q < I;
    };
    auto b_box = [&](int b) { return w.j0 + kChannels * b < J; };
    uint32_t boxes = 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int q = 0; q < kPerHalf; ++q) boxes += a_box(half, q);
    }
#pragma unroll
    for (int b = 0; b < BN / kChannels; ++b) boxes += b_box(b);
    wg::mbarrier_arrive_expect_tx(bar, boxes * kBoxBytes);
    const int npq = (w.begin + slab) * kPositions;
    // The slab's first position (n, p, q): x's window corner there (IM2COL).
    int n = 0, h = 0, wx = 0;
    if constexpr (IM2COL) {
      n = npq / PQ;
      const int pq = npq - n * PQ, p = pq / Q;
      h = lower_h + p * stride_h, wx = lower_w + (pq - p * Q) * stride_w;
    }
    auto load_x = [&](uint32_t dst, const CUtensorMap* map, int c, uint16_t oh, uint16_t ow) {
      if constexpr (IM2COL) {
        wg::tma_load_im2col_4d(dst, map, bar, c, wx, h, n, ow, oh);
      } else {
        wg::tma_load_2d(dst, map, bar, c, npq);
      }
    };
    const uint32_t stage_b = stage + kBM * kRowBytes;
    // R: dy's channels (a matrix) or x's (paired: its 64 at tap, then tap + 1).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int q = 0; q < kPerHalf; ++q) {
        if (!a_box(half, q)) continue;
        const uint32_t dst = stage + 8192 * half + kBoxBytes * q;
        if (paired) {
          load_x(dst, map_r, kChannels * q, half == 0 ? w.off_h : w.off_h1,
                 half == 0 ? w.off_w : w.off_w1);
        } else if (rows_are_dy) {
          wg::tma_load_2d(dst, map_r, bar, w.i0 + 64 * half + kChannels * q, npq);
        } else {
          load_x(dst, map_r, w.i0 + 64 * half + kChannels * q, w.off_h, w.off_w);
        }
      }
    }
    // S: x's channels where R is dy, else dy's.
#pragma unroll
    for (int b = 0; b < BN / kChannels; ++b) {
      if (!b_box(b)) continue;
      const uint32_t dst = stage_b + kBoxBytes * b;
      if (rows_are_dy) {
        load_x(dst, map_s, w.j0 + kChannels * b, w.off_h, w.off_w);
      } else {
        wg::tma_load_2d(dst, map_s, bar, w.j0 + kChannels * b, npq);
      }
    }
  }
  // f32: warp `warp` rewrites box `warp` of the stage (A's 4 and B's BN / 32, 4096 bytes each) in
  // place from the TMA's layout -- row p = position p, 32 channels, chunk j (channels 4j .. 4j+3)
  // at chunk j ^ (p % 8) -- to the K-major one -- row m = channel m, 32 positions, chunk a
  // (positions 4a .. 4a+3) at chunk a ^ (m % 8) -- each value rounded to TF32 (cvt.rna, as the
  // mma.sync kernels: the tensor cores would truncate). A box is 8 x 8 blocks of 4 x 4; a lane
  // moves block (a, c) (positions 4a.., channels 4c..) with 4 loads and 4 stores of 16 bytes, to
  // where block (c, a) lay. Lane l takes a = l % 8, c = a ^ d with d = l / 8 + 4 round: the blocks
  // of one d are their own mirror images, so each round overwrites only what it read (loads,
  // __syncwarp, stores), and the 8 lanes of a quarter-warp (a wavefront of 16-byte accesses)
  // touch chunks c ^ (4 (a % 2) + i) and a ^ (4 (c % 2) + i): 8 distinct ones, no conflicts.
  __device__ void transpose(uint8_t* stage, int warp, int lane) const {
    if (warp >= (kBM + BN) / 32) return;
    uint8_t* box = stage + warp * 4096;
    auto tf32 = [](float x) { return __uint_as_float(detail::to_tf32(x)); };
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      const int a = lane % 8, c = a ^ (lane / 8 + 4 * round);
      float4 v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int p = 4 * a + i;
        v[i] = *reinterpret_cast<const float4*>(box + p * kRowBytes + 16 * (c ^ (p % 8)));
      }
      __syncwarp();
      auto column = [&](int i, float x0, float x1, float x2, float x3) {
        const int m = 4 * c + i;
        *reinterpret_cast<float4*>(box + m * kRowBytes + 16 * (a ^ (m % 8))) =
            make_float4(tf32(x0), tf32(x1), tf32(x2), tf32(x3));
      };
      column(0, v[0].x, v[1].x, v[2].x, v[3].x);
      column(1, v[0].y, v[1].y, v[2].y, v[3].y);
      column(2, v[0].z, v[1].z, v[2].z, v[3].z);
      column(3, v[0].w, v[1].w, v[2].w, v[3].w);
      __syncwarp();
    }
  }
  // Thread (warp w, lane l) of warpgroup `consumer` holds rows 16w + l/4 and +8 of its 64,
  // columns 8j + 2(l%4), +1: values 4j, 4j+1 and 4j+2, 4j+3. The kernel calls this once both
  // warpgroups are done with the ring (all of the block's copies landed): the tile goes into the
  // ring's bytes (`staging` less the warp's offset), the cluster syncs, and the block sums its
  // share of the tile's 16-byte chunks (chunks rank * 256 + t, + 256 * cluster, ...) over the
  // cluster's blocks in rank order; a second sync keeps every block's shared memory alive until
  // all have read it.
  template <int STAGED>
  __device__ void store(const Where& w, int consumer, const float (&acc)[BN / 2],
                        float* staging) const {
    static_assert(STAGED == BN, "a block a unit: the drained ring holds the tile");
    const int t = threadIdx.x, lane = t % 32;
    float* tile = staging - (t / 32) * wg::staging_warp_floats(STAGED);
    const int row = consumer * 64 + t % 128 / 32 * 16 + lane / 4;  // D's row i - i0
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = 8 * j + 2 * (lane % 4);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = row + 8 * half;
        const float v0 = acc[4 * j + 2 * half], v1 = acc[4 * j + 2 * half + 1];
        if (rows_are_dy) {  // T[i][j]: k = i0 + i, c = j0 + j
          *reinterpret_cast<float2*>(tile + r * kPitchDy + col) = make_float2(v0, v1);
        } else {  // T[j][i]: k = j0 + j, c = i0 + i (paired: tap + i / 64, c = i % 64)
          tile[col * kPitchX + r] = v0, tile[(col + 1) * kPitchX + r] = v1;
        }
      }
    }
    wg::cluster_sync();
    const int outer = rows_are_dy ? kBM : BN, inner = rows_are_dy ? BN : kBM;
    const int pitch = rows_are_dy ? kPitchDy : kPitchX, chunks = outer * inner / 4;
    const int K = rows_are_dy ? I : J, C = rows_are_dy ? J : I;
    const uint32_t rank = wg::cluster_rank();
    const uint32_t tile_at = uint32_t(__cvta_generic_to_shared(tile));
    float* out = groups == 1 ? dw : partial + int64_t(w.group) * K * taps * C;
    for (int e = int(rank) * wg::kThreads + t; e < chunks; e += wg::kThreads * cluster) {
      const int o = e / (inner / 4), n = e % (inner / 4) * 4;
      int k, c, tap = w.tap;
      if (rows_are_dy) {
        k = w.i0 + o, c = w.j0 + n;
      } else if (paired) {
        k = w.j0 + o, c = n % 64, tap += n / 64;
      } else {
        k = w.j0 + o, c = w.i0 + n;
      }
      if (k >= K || c >= C || tap >= taps) continue;  // C is a multiple of 8: c + 3 < C too
      const uint32_t at = tile_at + uint32_t(o * pitch + n) * 4;
      float4 sum = wg::load_cluster_f4(wg::cluster_address(at, 0));
      for (int q = 1; q < cluster; ++q) {
        const float4 v = wg::load_cluster_f4(wg::cluster_address(at, uint32_t(q)));
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      float* dst = out + (int64_t(k) * taps + tap) * C + c;
      if (groups > 1) {  // the group's partial, written
        if (vector) {
          *reinterpret_cast<float4*>(dst) = sum;
        } else {
          dst[0] = sum.x, dst[1] = sum.y, dst[2] = sum.z, dst[3] = sum.w;
        }
      } else if (vector) {  // dw += the cluster's sum
        float4 d = *reinterpret_cast<float4*>(dst);
        d.x += sum.x, d.y += sum.y, d.z += sum.z, d.w += sum.w;
        *reinterpret_cast<float4*>(dst) = d;
      } else {
        dst[0] += sum.x, dst[1] += sum.y, dst[2] += sum.z, dst[3] += sum.w;
      }
    }
    wg::cluster_sync();
  }
};

// f32 in tf32 at 128 columns: the transposers' warpgroup (128 threads) between the producer warp
// and the consumers, kTf32Threads a block, one block an SM. Two rings, each stage A's 128 rows and
// B's BN of 128 bytes: the raw ring (the TMA's MN-major boxes) and the K-major ring (the
// transposers' tiles), 96 KB each (3 stages at BN 128, 4 at 64), then four barriers a stage: raw
// full (the producer's arrive and the TMA's bytes), raw empty (the transposers), K-major full (the
// transposers), K-major empty (the consumers). The epilogue parks its tile in the drained raw ring
// (69.6 KB at most). Measured alternatives (H200, 2026-11-28, session 22, calls 2-4, against this
// in the same call): two transposer warpgroups 1.01-1.04x the time; 5 raw and 2 K-major stages at
// BN 128 (6 and 3 at 64) 0.97-1.04x; rounding skipped 0.94x (the operands would be truncated).
constexpr int kTransposers = 128, kTf32Threads = wg::kThreads + kTransposers + 32;

template <int BN>
struct Tf32Ring {
  static constexpr int STAGE_BYTES = (kBM + BN) * kRowBytes;
  static constexpr int RAW_STAGES = BN == 128 ? 3 : 4, TILE_STAGES = RAW_STAGES;
  static constexpr int KMAJOR = RAW_STAGES * STAGE_BYTES;
  static constexpr int BARRIERS = KMAJOR + TILE_STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES =
      BARRIERS + 2 * (RAW_STAGES + TILE_STAGES) * 8 + 1024;  // + room to align the base
  static_assert(TILE_STAGES >= 2 && RAW_STAGES >= 2 && SMEM_BYTES <= wg::kMaxSharedBytes,
                "the rings fit");
  static_assert(wg::kThreads / 32 * wg::staging_warp_floats(BN) * 4 <= KMAJOR &&
                    BN * (kBM + 4) * 4 <= KMAJOR,
                "the epilogue's tile fits the raw ring");
};

// One stage's boxes (A's 4 and B's BN / 32, 4096 bytes each, at the same offsets in both rings),
// from the TMA's layout -- row p = position p, 32 channels, chunk j (channels 4j .. 4j+3) at chunk
// j ^ (p % 8) -- to the K-major one -- row m = channel m, 32 positions, chunk a (positions 4a ..
// 4a+3) at chunk a ^ (m % 8) -- each value rounded to TF32. A thread moves 4 x 4 blocks: 4 loads
// of 16 bytes (positions 4a .. 4a+3 at channels 4c ..), 4 stores (channels 4c .. 4c+3 at positions
// 4a ..). The 8 lanes of a quarter-warp (one 16-byte access each: a shared-memory wavefront) take
// a = k, c = k ^ d (k = lane % 8, d one of 8 a box): their chunks c ^ (4 (a % 2) + i) and
// a ^ (4 (c % 2) + i) are 8 distinct ones, so no access conflicts.
template <int BN>
__device__ __forceinline__ void transpose_stage(const uint8_t* raw, uint8_t* kmajor, int thread) {
  constexpr int kBoxes = (kBM + BN) / 32, kQuarters = kTransposers / 8;
  const int k = thread % 8;
  // A loop, not unrolled: the unrolled form (every load first) took 1.04-1.17x the time
  // (H200, 2026-11-28, session 22, call 4).
  for (int task = thread / 8; task < kBoxes * 8; task += kQuarters) {
    const int a = k, c = k ^ (task % 8);
    const uint8_t* from = raw + task / 8 * 4096;
    uint8_t* to = kmajor + task / 8 * 4096;
    float4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int p = 4 * a + i;
      v[i] = *reinterpret_cast<const float4*>(from + p * kRowBytes + 16 * (c ^ (p % 8)));
    }
    auto tf32 = [](float x) { return __uint_as_float(detail::to_tf32(x)); };
    const float4 t[4] = {make_float4(tf32(v[0].x), tf32(v[1].x), tf32(v[2].x), tf32(v[3].x)),
                         make_float4(tf32(v[0].y), tf32(v[1].y), tf32(v[2].y), tf32(v[3].y)),
                         make_float4(tf32(v[0].z), tf32(v[1].z), tf32(v[2].z), tf32(v[3].z)),
                         make_float4(tf32(v[0].w), tf32(v[1].w), tf32(v[2].w), tf32(v[3].w))};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = 4 * c + i;
      *reinterpret_cast<float4*>(to + m * kRowBytes + 16 * (a ^ (m % 8))) = t[i];
    }
  }
}

// The f32 filter gradient's kernel: one unit (blockIdx.x) a block, FilterProblem<float>'s fill,
// slabs and store. Lane 0 of the last warp fills the raw ring; the transposers turn raw stage s
// into K-major stage s (once the consumers released that stage's last tenant), make their stores
// visible to the async proxy (wgmma reads through it), and hand both stages on; the consumers
// (warpgroups 0 and 1) run wgmma m64nBNk8 on the K-major tiles as the 16-bit kernel does on its
// ring, keeping one slab's group in flight.
template <int BN, bool IM2COL>
__global__ void __launch_bounds__(kTf32Threads, 1)
    tf32_filter_kernel(const __grid_constant__ CUtensorMap map_r,
                       const __grid_constant__ CUtensorMap map_s,
                       const __grid_constant__ FilterProblem<float, BN, IM2COL> problem) {
  using R = Tf32Ring<BN>;
  using Problem = FilterProblem<float, BN, IM2COL>;
  static_assert(Problem::kTransposes && !Problem::kMnMajorA && !Problem::kMnMajorB,
                "the wgmmas read the transposers' K-major tiles");
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t align = (1024 - raw_address % 1024) % 1024;
  uint8_t* ring = raw_smem + align;  // the raw ring, then the K-major one
  const uint32_t base = raw_address + align, bars = base + R::BARRIERS;
  constexpr int RS = R::RAW_STAGES, TS = R::TILE_STAGES;
  auto raw_full = [&](int s) { return bars + 8 * s; };
  auto raw_empty = [&](int s) { return bars + 8 * (RS + s); };
  auto tile_full = [&](int s) { return bars + 8 * (2 * RS + s); };
  auto tile_empty = [&](int s) { return bars + 8 * (2 * RS + TS + s); };

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < RS; ++s) {
      wg::mbarrier_init(raw_full(s), 1);
      wg::mbarrier_init(raw_empty(s), kTransposers);
    }
    for (int s = 0; s < TS; ++s) {
      wg::mbarrier_init(tile_full(s), kTransposers);
      wg::mbarrier_init(tile_empty(s), wg::kThreads);
    }
    wg::fence_barrier_init();
  }
  __syncthreads();
  const auto where = problem.locate(int(blockIdx.x));
  const int slabs = problem.slabs(where);

  if (tid >= wg::kThreads + kTransposers) {  // the producer warp
    if (tid != wg::kThreads + kTransposers) return;
    for (int s = 0; s < slabs; ++s) {
      const int stage = s % RS;
      if (s >= RS) wg::mbarrier_wait(raw_empty(stage), (s / RS - 1) & 1);
      problem.fill(where, s, base + stage * R::STAGE_BYTES, raw_full(stage), &map_r, &map_s);
    }
    return;
  }
  if (tid >= wg::kThreads) {  // the transposers
    for (int s = 0; s < slabs; ++s) {
      const int raw = s % RS, tile = s % TS;
      wg::mbarrier_wait(raw_full(raw), (s / RS) & 1);
      if (s >= TS) wg::mbarrier_wait(tile_empty(tile), (s / TS - 1) & 1);
      transpose_stage<BN>(ring + raw * R::STAGE_BYTES, ring + R::KMAJOR + tile * R::STAGE_BYTES,
                          tid - wg::kThreads);
      detail::fence_async_shared();
      wg::mbarrier_arrive(tile_full(tile));
      wg::mbarrier_arrive(raw_empty(raw));
    }
    return;
  }

  const int consumer = tid / 128;
  float acc[BN / 2];
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) acc[a] = 0.0f;
  for (int s = 0; s < slabs; ++s) {
    const int stage = s % TS;
    wg::mbarrier_wait(tile_full(stage), (s / TS) & 1);
    const uint32_t tile = base + R::KMAJOR + stage * R::STAGE_BYTES;
    detail::wgmma_fence();
    wg::slab_mma<float, BN, false, false>(acc, tile + consumer * 8192, tile + kBM * kRowBytes);
    detail::wgmma_commit();
    detail::wgmma_wait<1>();  // slab s-1's group has retired: its stage goes back
    if (s > 0) wg::mbarrier_arrive(tile_empty((s - 1) % TS));
  }
  detail::wgmma_wait<0>();
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) detail::fence_register(acc[a]);
  // The raw ring is drained: the transposers read every stage before the consumers' last wait.
  wg::consumers_sync();
  float* staging = reinterpret_cast<float*>(ring) + (tid / 32) * wg::staging_warp_floats(BN);
  problem.template store<BN>(where, consumer, acc, staging);
}

// The blocks resident at once in clusters of 1 .. kMaxCluster (index: the cluster's size), asked
// of the driver once a device and kind of kernel (16-bit, f32): a GPC holds whole clusters only,
// so clusters of 7 or 8 leave some of its 2 x 16-18 block slots empty (without this, 256@14's 252
// blocks in clusters of 7 took 0.096 ms against 0.066 unclustered: H200, 2026-11-28, session 20,
// call 2; asked, call 3 took 0.0675). Where the driver does not answer, every size is taken to
// fill the target (kTargetBlocks, kTf32Blocks) -- and that answer is kept too: the workspace's
// size and the launch must see the same cut.
template <class Kernel>
std::array<int, kMaxCluster + 1> ask_slots(Kernel kernel, int bytes, int threads, int target) {
  std::array<int, kMaxCluster + 1> slots{};
  for (int c = 1; c <= kMaxCluster; ++c) slots[size_t(c)] = target / c * c;
  const bool sized = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          bytes) == cudaSuccess;
  if (!sized) cudaGetLastError();  // clear it: the estimates stand
  for (int c = 1; sized && c <= kMaxCluster; ++c) {
    const wg::ClusterLaunch launch(int64_t(c) * 64, bytes, nullptr, c, threads);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config) != cudaSuccess) {
      cudaGetLastError();  // clear it: the estimate stands
      continue;
    }
    slots[size_t(c)] = std::min(target, clusters * c);
  }
  return slots;
}

std::array<int, kMaxCluster + 1> cluster_slots(bool transposers) {
  static std::mutex mutex;
  static std::map<std::pair<int, bool>, std::array<int, kMaxCluster + 1>> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    std::array<int, kMaxCluster + 1> slots{};
    const int target = transposers ? kTf32Blocks : kTargetBlocks;
    for (int c = 1; c <= kMaxCluster; ++c) slots[size_t(c)] = target / c * c;
    return slots;
  }
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find({device, transposers}); it != known.end()) return it->second;
  // Every filter kernel of a kind has the same threads and shared memory: one stands in (the
  // ring kernel's 96 KB, 16-bit and f32 at 64 columns; tf32_filter_kernel's two rings).
  const auto slots = transposers
                         ? ask_slots(tf32_filter_kernel<128, true>, Tf32Ring<128>::SMEM_BYTES,
                                     kTf32Threads, kTf32Blocks)
                         : ask_slots(wg::wgmma_kernel<Bf16, 128, FilterProblem<Bf16, 128, true>, 0>,
                                     wg::Ring<128>::SMEM_BYTES, wg::kBlockThreads, kTargetBlocks);
  known[{device, transposers}] = slots;
  return slots;
}

// The cut: which tensor gives the rows, the tile, the slices (`length` slabs each) in clusters.
struct FilterPlan {
  bool rows_are_dy;  // R = dy (rows k, columns c) or R = x (rows c, columns k)
  bool plain;        // a 1x1 at stride 1 without padding: x read as a matrix, not im2col
  bool paired;       // two taps a tile (C = 64 with taps): R = x, I = 64, (taps + 1) / 2 tap blocks
  int I, J, bn, tiles_j, tiles, taps, tap_blocks, cluster, groups, slices, length, slabs;
};

// f32: slabs of 32 positions; at 64 columns the ring kernel's blocks (half the 16-bit slab's
// products at half the rate: the same slab times), at 128 tf32_filter_kernel's, one an SM, a
// slab's time alone on it (2 x 128 x 128 x 32 flops plus the transposes' shared-memory traffic)
// taken as about 0.4 us: estimates, not tuned per shape.
FilterPlan filter_plan(const Conv2dGeometry& g, bool f32) {
  FilterPlan f{};
  const int64_t NPQ = g.N * g.P() * g.Q();
  f.plain =
      g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0 && g.stride_h == 1 && g.stride_w == 1;
  f.taps = int(g.R * g.S);
  f.paired = wgmma_backward_filter_pairs_taps(g);
  f.rows_are_dy = !f.paired && g.K >= g.C;
  f.I = int(f.rows_are_dy ? g.K : g.C), f.J = int(f.rows_are_dy ? g.C : g.K);
  f.bn = f.J > 64 ? 128 : 64;
  f.tiles_j = (f.J + f.bn - 1) / f.bn;
  f.tiles = (f.paired ? 1 : (f.I + kBM - 1) / kBM) * f.tiles_j;
  f.tap_blocks = f.paired ? (f.taps + 1) / 2 : f.taps;
  const int positions = f32 ? 32 : 64;
  const int64_t slabs = (NPQ + positions - 1) / positions;
  f.slabs = int(slabs);
  const int64_t per_slice = kMinPositionsPerSlice / positions;
  const int64_t most = std::clamp<int64_t>((slabs + per_slice - 1) / per_slice, 1, 65535);
  // Paired taps take clusters of one block (groups only): in clusters of 4 the 64@56 3x3 took
  // 0.0972 ms at batch 128 and 0.0569 at 64 against 0.0851 and 0.0503 unclustered (H200,
  // 2026-11-28, session 20, call 3; its 64 x 64 filter's partials are small: little to save).
  const bool transposers = f32 && f.bn == 128;
  std::array<int, kMaxCluster + 1> slots = cluster_slots(transposers);
  if (f.paired) std::fill(slots.begin() + 2, slots.end(), 0);
  const double slab_us = transposers ? 0.4 : f.bn == 128 ? 0.75 : 0.37;
  const Cut cut =
      cheapest_cut(int64_t(f.tiles) * f.tap_blocks, slabs, slab_us, double(f.taps) * f.I * f.J * 4,
                   most, slots, transposers ? 1.0 : kLoneRound);
  f.cluster = cut.cluster, f.groups = cut.groups, f.slices = cut.cluster * cut.groups;
  f.length = int((slabs + f.slices - 1) / f.slices);
  return f;
}

// dw[i] += the sum over groups, in order, of partial[group][i] (i < count, dw's size): one
// element a thread, eight groups' loads in flight (added in order still). The paired 64@56's dw
// is 36,864 floats in 52 groups: four a thread left 36 blocks for 132 SMs (its whole pass at
// batch 64 0.0590 ms, this 0.0553, 494ebbc's slice sums 0.0509 in both calls; H200, 2026-11-28,
// session 20, calls 4 and 5).
__global__ void __launch_bounds__(256)
    sum_groups_kernel(const float* __restrict__ partial, int groups, int64_t count,
                      float* __restrict__ dw) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += stride) {
    float sum = partial[i];
#pragma unroll 8
    for (int g = 1; g < groups; ++g) sum += partial[g * count + i];
    dw[i] += sum;
  }
}

template <class E>
void filter_typed(const Conv2dGeometry& g, wg::MapType type, const void* x, const void* dy,
                  float* dw, void* workspace, gpu::Stream stream, const char* what) {
  constexpr bool kF32 = std::is_same_v<E, float>;
  const FilterPlan f = filter_plan(g, kF32);
  const int positions = FilterProblem<E, 64, true>::kPositions;
  const int64_t NPQ = g.N * g.P() * g.Q();
  const int pad_h = int(g.pad_h), pad_w = int(g.pad_w);
  const CUtensorMap map_dy = wg::matrix_map(type, dy, NPQ, g.K, positions);
  const CUtensorMap map_x = f.plain ? wg::matrix_map(type, x, NPQ, g.C, positions)
                                    : wg::im2col_map(type, x, g.N, g.H, g.W, g.C, -pad_h, -pad_w,
                                                     pad_h - int((g.R - 1) * g.dilation_h),
                                                     pad_w - int((g.S - 1) * g.dilation_w),
                                                     int(g.stride_h), int(g.stride_w), positions);
  const CUtensorMap& map_r = f.rows_are_dy ? map_dy : map_x;
  const CUtensorMap& map_s = f.rows_are_dy ? map_x : map_dy;
  auto* partial = static_cast<float*>(workspace);
  if (f.groups > 1 && partial == nullptr) {
    throw Error(std::string(what) + ": " + std::to_string(f.groups) +
                " groups of slices are summed in the workspace (its _workspace query): none given");
  }
  // Each group's partial starts K * taps * C floats (a multiple of 16) on: aligned where the
  // workspace is.
  const void* out = f.groups > 1 ? static_cast<const void*>(partial) : dw;
  const bool vector = reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int blocks_x = f.tiles * f.tap_blocks;
  auto go = [&](auto bn, auto im2col) {
    constexpr int BN = decltype(bn)::value;
    constexpr bool IM2COL = decltype(im2col)::value;
    FilterProblem<E, BN, IM2COL> problem{};
    problem.I = f.I, problem.J = f.J, problem.tiles = f.tiles, problem.tiles_j = f.tiles_j;
    problem.length = f.length, problem.slabs_all = f.slabs;
    problem.dw = dw, problem.partial = partial, problem.vector = vector;
    problem.PQ = int(g.P() * g.Q()), problem.Q = int(g.Q());
    problem.lower_h = -pad_h, problem.lower_w = -pad_w;
    problem.stride_h = int(g.stride_h), problem.stride_w = int(g.stride_w);
    problem.taps = f.taps, problem.S = int(g.S);
    problem.dil_h = int(g.dilation_h), problem.dil_w = int(g.dilation_w);
    problem.rows_are_dy = f.rows_are_dy, problem.paired = f.paired;
    problem.blocks_x = blocks_x, problem.cluster = f.cluster, problem.groups = f.groups;
    const int64_t blocks = int64_t(blocks_x) * f.slices;
    if constexpr (kF32 && BN == 128) {
      const auto kernel = tf32_filter_kernel<BN, IM2COL>;
      constexpr int kBytes = Tf32Ring<BN>::SMEM_BYTES;
      detail::set_shared_memory_limit(kernel, kBytes, what);
      const wg::ClusterLaunch launch(blocks, kBytes, stream, f.cluster, kTf32Threads);
      const cudaError_t e = cudaLaunchKernelEx(&launch.config, kernel, map_r, map_s, problem);
      if (e != cudaSuccess) {
        throw DeviceError(std::string("CUDA kernel ") + what + " failed to launch in clusters of " +
                          std::to_string(f.cluster) + ": " + cudaGetErrorString(e));
      }
      gpu::check_launch(what);
    } else {
      wg::launch<E, BN>(map_r, map_s, problem, blocks, stream, what, f.cluster);
    }
  };
  using Im2col = std::true_type;
  using Plain = std::false_type;
  if (f.bn == 128) {
    f.plain ? go(std::integral_constant<int, 128>{}, Plain{})
            : go(std::integral_constant<int, 128>{}, Im2col{});
  } else {
    f.plain ? go(std::integral_constant<int, 64>{}, Plain{})
            : go(std::integral_constant<int, 64>{}, Im2col{});
  }
  if (f.groups > 1) {
    const int64_t count = g.K * f.taps * g.C;
    const unsigned blocks = unsigned(std::clamp<int64_t>((count + 255) / 256, 1, 4096));
    sum_groups_kernel<<<blocks, 256, 0, stream>>>(partial, f.groups, count, dw);
    gpu::check_launch(what);
  }
}

}  // namespace

bool wgmma_backward_filter_pairs_taps(const Conv2dGeometry& g) {
  return g.C == 64 && g.R * g.S >= 2;
}

// The im2col map's limits: steps (the strides) 1..8, corners -pad and pad - (taps - 1) *
// dilation within [-128, 127], offsets (taps - 1) * dilation 16-bit; N*P*Q an int.
bool wgmma_backward_filter_fits(const Conv2dGeometry& g, int channel_multiple) {
  auto corner = [](int64_t v) { return v >= -128 && v <= 127; };
  const int64_t reach_h = (g.R - 1) * g.dilation_h, reach_w = (g.S - 1) * g.dilation_w;
  return g.groups == 1 && g.stride_h <= 8 && g.stride_w <= 8 && g.C % channel_multiple == 0 &&
         g.K % channel_multiple == 0 && corner(-g.pad_h) && corner(-g.pad_w) &&
         corner(g.pad_h - reach_h) && corner(g.pad_w - reach_w) && reach_h < 65536 &&
         reach_w < 65536 && g.N * g.P() * g.Q() + 64 < INT32_MAX;
}

size_t wgmma_backward_filter_workspace(const Conv2dGeometry& g, bool f32) {
  const FilterPlan f = filter_plan(g, f32);
  return f.groups > 1 ? size_t(f.groups) * size_t(g.K * f.taps * g.C) * sizeof(float) : 0;
}

int wgmma_backward_filter_cluster(const Conv2dGeometry& g, bool f32) {
  return filter_plan(g, f32).cluster;
}

void wgmma_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                           float* dw, void* workspace, gpu::Stream stream) {
  const char* what = "conv2d_tc_backward_filter (wgmma)";
  if (type == TcType::bf16) {
    filter_typed<Bf16>(g, wg::map_type(type), x, dy, dw, workspace, stream, what);
  } else {
    filter_typed<F16>(g, wg::map_type(type), x, dy, dw, workspace, stream, what);
  }
}

void wgmma_backward_filter_f32(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                               void* workspace, gpu::Stream stream) {
  filter_typed<float>(g, wg::kF32Map, x, dy, dw, workspace, stream,
                      "conv2d_backward_filter_nhwc (tf32 wgmma)");
}

}  // namespace crema::kernels::cuda::tc
