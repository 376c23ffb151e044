// The Problem of the filter gradient on wgmma (convolution_tc_wgmma_filter_sm90a.cu has the
// design, the cut and the launches): where a unit works, the boxes a slab asks the TMA for, f32's
// in-place transpose, the epilogue's cluster sums. Included by that file alone (sm_90a).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::tc::filter {

using wg::kBM, wg::kRowBytes;

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
    const uint32_t tile_at = uint32_t(__cvta_generic_to_shared(tile));
    add_cluster_of(cluster, w, tile_at);
    wg::cluster_sync();
  }

  // add_cluster<size> (size 1 to 8): the cluster's size as a constant, its loads unrolled.
  template <int CL = 1>
  __device__ void add_cluster_of(int size, const Where& w, uint32_t tile_at) const {
    if constexpr (CL < 8) {
      if (size > CL) return add_cluster_of<CL + 1>(size, w, tile_at);
    }
    add_cluster<CL>(w, tile_at);
  }

  // This block's share of the parked tiles' 16-byte chunks (chunks rank * 256 + t, + 256 * CL,
  // ...), each the sum of the CL blocks' chunks in rank order, into dw (+=, groups 1) or the
  // group's partial. kBatch chunks at a time with every load in flight together (dw's old values,
  // then kBatch x CL cluster loads: about eight 16-byte ones): one chunk at a time, each waiting on
  // its loads before the next's, the epilogue of a 128 x 128 tile took microseconds.
  template <int CL>
  __device__ void add_cluster(const Where& w, uint32_t tile_at) const {
    constexpr int kLoads = kF32 ? 4 : 8;  // f32's 64-column kernel spilled at 8
    constexpr int kBatch = CL >= kLoads ? 1 : kLoads / CL;
    const int t = threadIdx.x;
    const int outer = rows_are_dy ? kBM : BN, inner = rows_are_dy ? BN : kBM;
    const int pitch = rows_are_dy ? kPitchDy : kPitchX, chunks = outer * inner / 4;
    const int K = rows_are_dy ? I : J, C = rows_are_dy ? J : I;
    const bool accumulate = groups == 1;  // dw += the cluster's sum; else the group's partial
    float* out = accumulate ? dw : partial + int64_t(w.group) * K * taps * C;
    constexpr int kStep = wg::kThreads * CL;
    for (int e0 = int(wg::cluster_rank()) * wg::kThreads + t; e0 < chunks; e0 += kBatch * kStep) {
      float* dst[kBatch];
      uint32_t at[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int e = e0 + b * kStep;
        const int o = e / (inner / 4), n = e % (inner / 4) * 4;
        int k, c, tap = w.tap;
        if (rows_are_dy) {
          k = w.i0 + o, c = w.j0 + n;
        } else if (paired) {
          k = w.j0 + o, c = n % 64, tap += n / 64;
        } else {
          k = w.j0 + o, c = w.i0 + n;
        }
        // C is a multiple of 8: c + 3 < C too.
        const bool inside = e < chunks && k < K && c < C && tap < taps;
        dst[b] = inside ? out + (int64_t(k) * taps + tap) * C + c : nullptr;
        at[b] = tile_at + uint32_t(o * pitch + n) * 4;
      }
      float4 old[kBatch], part[kBatch][CL];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        old[b] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (accumulate && dst[b] != nullptr) {
          old[b] = vector ? *reinterpret_cast<const float4*>(dst[b])
                          : make_float4(dst[b][0], dst[b][1], dst[b][2], dst[b][3]);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
#pragma unroll
        for (int q = 0; q < CL; ++q) {
          part[b][q] = dst[b] != nullptr
                           ? wg::load_cluster_f4(wg::cluster_address(at[b], uint32_t(q)))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (dst[b] == nullptr) continue;
        float4 sum = part[b][0];
#pragma unroll
        for (int q = 1; q < CL; ++q) {
          sum.x += part[b][q].x, sum.y += part[b][q].y, sum.z += part[b][q].z,
              sum.w += part[b][q].w;
        }
        const float4 d =
            make_float4(old[b].x + sum.x, old[b].y + sum.y, old[b].z + sum.z, old[b].w + sum.w);
        if (vector) {
          *reinterpret_cast<float4*>(dst[b]) = d;
        } else {
          dst[b][0] = d.x, dst[b][1] = d.y, dst[b][2] = d.z, dst[b][3] = d.w;
        }
      }
    }
  }
};

}  // namespace crema::kernels::cuda::tc::filter
