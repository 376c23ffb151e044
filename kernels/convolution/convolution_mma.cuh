// The tensor-core main loop of the convolutions' tf32 and bf16 maths: the block-tiled loop of
// kernels/tiles/block_tile.cuh (same loaders, same k-major shared slabs, same store callback)
// with the slab multiplied by mma.sync instead of FFMA. Used by v3 (pointwise GEMMs) and v5
// (Winograd F(2x2,3x3)'s batched GEMMs) when the math is tf32 or bf16.
//
// A block of 256 threads computes a 64 x 128 tile of C; its 8 warps sit 2 (rows) x 4 (columns),
// each on a 32 x 32 piece: 2 x 4 mma tiles of 16 x 8, 32 fp32 accumulators a thread. A slab is
// 16 deep: two m16n8k8 TF32 steps or one m16n8k16 bf16 step. Fragment elements are read from the
// fp32 slab and rounded on the way (cvt.rna.tf32.f32, or cvt.rn.bf16x2.f32 for a pair along k),
// so the loaders and memory stay fp32. Fragment layouts (PTX ISA), g = lane / 4, t = lane % 4:
//   tf32 a (row, k) = (g, t), (g+8, t), (g, t+4), (g+8, t+4); b (k, n) = (t, g), (t+4, g)
//   bf16 a = (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); b = (2t.., g), (2t+8.., g)
//   c (row, n) = (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
// In the k-major slabs ([BK][side + 4]) these reads hit 32 different banks per warp. Each output
// is summed by one thread in k order, so results are deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/tiles/block_tile.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::conv_mma {

// The block tile (TM, TN only fix the thread count for the loaders: (64/4) * (128/8) = 256).
using Tile = tile::Config<64, 128, 16, 4, 8, 1>;
constexpr int kWarpsM = 2, kWarpsN = 4, kWarpM = 32, kWarpN = 32;
constexpr int kMTiles = kWarpM / 16, kNTiles = kWarpN / 8;
static_assert(kWarpsM * kWarpM == Tile::BM && kWarpsN * kWarpN == Tile::BN, "warps cover a tile");
static_assert(kWarpsM * kWarpsN * 32 == Tile::THREADS, "one warp per piece");

using Acc = float[kMTiles][kNTiles][4];

// acc += this warp's piece of a[k]^T b[k] over the slab (rows wm*32.., columns wn*32..).
template <bool BF16>
__device__ __forceinline__ void multiply_slab(const tile::SharedStorage<Tile>& sm, int wm, int wn,
                                              int lane, Acc& acc) {
  const int g = lane / 4, t = lane % 4;
  const auto& a = sm.tiles.a;  // [BK][BM + 4]: a[k][row]
  const auto& b = sm.tiles.b;  // [BK][BN + 4]: b[k][column]
  constexpr int kStep = BF16 ? 16 : 8;
#pragma unroll
  for (int k = 0; k < Tile::BK; k += kStep) {
    uint32_t fa[kMTiles][4], fb[kNTiles][2];
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      const int r = wm * kWarpM + i * 16 + g;
      if constexpr (BF16) {
        fa[i][0] = detail::to_bf16x2(a[k + 2 * t][r], a[k + 2 * t + 1][r]);
        fa[i][1] = detail::to_bf16x2(a[k + 2 * t][r + 8], a[k + 2 * t + 1][r + 8]);
        fa[i][2] = detail::to_bf16x2(a[k + 2 * t + 8][r], a[k + 2 * t + 9][r]);
        fa[i][3] = detail::to_bf16x2(a[k + 2 * t + 8][r + 8], a[k + 2 * t + 9][r + 8]);
      } else {
        fa[i][0] = detail::to_tf32(a[k + t][r]);
        fa[i][1] = detail::to_tf32(a[k + t][r + 8]);
        fa[i][2] = detail::to_tf32(a[k + t + 4][r]);
        fa[i][3] = detail::to_tf32(a[k + t + 4][r + 8]);
      }
    }
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int n = wn * kWarpN + j * 8 + g;
      if constexpr (BF16) {
        fb[j][0] = detail::to_bf16x2(b[k + 2 * t][n], b[k + 2 * t + 1][n]);
        fb[j][1] = detail::to_bf16x2(b[k + 2 * t + 8][n], b[k + 2 * t + 9][n]);
      } else {
        fb[j][0] = detail::to_tf32(b[k + t][n]);
        fb[j][1] = detail::to_tf32(b[k + t + 4][n]);
      }
    }
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        if constexpr (BF16) {
          detail::mma_bf16(acc[i][j], fa[i], fb[j]);
        } else {
          detail::mma_tf32(acc[i][j], fa[i], fb[j]);
        }
      }
    }
  }
}

// C[m0 .., n0 ..] = op(A) op(B) over inner indices [k_begin, k_end), handed to store(m, n, v,
// count) as tile::finish does (here count <= 2: the two columns of an accumulator pair). The
// slabs go through tile::for_each_slab with tile::accumulate's loaders (fetch, stash), built
// for Tile. Every thread must call this.
template <bool BF16, class LoadA, class LoadB, class Store>
__device__ void gemm(LoadA& load_a, LoadB& load_b, int k_begin, int k_end,
                     tile::SharedStorage<Tile>& sm, int m0, int n0, int M, int N, Store& store) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  Acc acc = {};
  tile::for_each_slab(load_a, load_b, k_begin, k_end, sm,
                      [&] { multiply_slab<BF16>(sm, wm, wn, lane, acc); });
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm * kWarpM + i * 16 + g + 8 * half;
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const int n = n0 + wn * kWarpN + j * 8 + 2 * t;
        if (n >= N) continue;
        const float v[2] = {acc[i][j][2 * half], acc[i][j][2 * half + 1]};
        store(m, n, v, N - n < 2 ? 1 : 2);
      }
    }
  }
}

}  // namespace crema::kernels::cuda::conv_mma
