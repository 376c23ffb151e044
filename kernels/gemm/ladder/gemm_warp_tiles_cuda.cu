// v5 warp_tiles: fp32 SIMT (FFMA), v3's register tiles rearranged around warps.
//
//   block tile 128 x 128, k slab 16 (v3: 8), 256 threads, 8 x 8 results per thread
//   warps as 2 (m) x 4 (n), each a 64 x 32 patch of C; inside a warp 8 x 4 threads, thread
//   (tm, tn) owning rows {0, 32} + 4tm .. +3 and columns {0, 16} + 4tn .. +3 of the patch: per k
//   a warp reads 128 contiguous bytes of the A slab and 64 of B (one shared-memory wavefront
//   each), every thread 2 float4s of each
//   two shared buffers: slab s+1 is fetched into registers (float4 where aligned), multiplied
//   slab s, then stored into the other buffer -- one barrier per slab instead of v3's two
//   blocks walk the tiles of C in groups of 8 tile rows (L2 reuse of the operand panels)
//
// The loaders are v3's (kernels/tiles/block_tile.cuh: zero-fill past the edges, scalar fallback for
// unaligned operands), so every shape, transpose, leading dimension and alignment is accepted.
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/ladder/gemm_ladder_internal.h"
#include "kernels/tiles/block_tile.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 16, kThreads = 256;
constexpr int kStride = kBM + tile::kPad;  // shared slab row: 128 floats + 4 of padding

template <bool TA, bool TB>
__global__ void __launch_bounds__(kThreads)
    sgemm_warp_tiles_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                            int64_t lda, const float* __restrict__ B, int64_t ldb, float beta,
                            float* __restrict__ C, int64_t ldc, bool vec_a, bool vec_b) {
  __shared__ __align__(16) float sa[2][kBK][kStride];  // op(A) slab, k-major: sa[.][k][m]
  __shared__ __align__(16) float sb[2][kBK][kStride];  // op(B) slab: sb[.][k][n]
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  const TileCoord tile = grouped_tile(blockIdx.x, tiles_m, tiles_n, 8);
  const int m0 = tile.m * kBM, n0 = tile.n * kBN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // First row and column of the thread's two 4-wide groups in the block tile.
  const int row = warp / 4 * 64 + lane / 4 * 4, col = warp % 4 * 32 + lane % 4 * 4;

  tile::DenseLoader<kBM, kBK, kThreads, !TA> load_a{A, lda, m0, M, K, vec_a, tid, {}};
  tile::DenseLoader<kBN, kBK, kThreads, TB> load_b{B, ldb, n0, N, K, vec_b, tid, {}};
  const int slabs = (K + kBK - 1) / kBK;
  load_a.fetch(0);
  load_b.fetch(0);
  load_a.stash(sa[0]);
  load_b.stash(sb[0]);
  __syncthreads();

  float acc[8][8] = {};
  for (int s = 0; s < slabs; ++s) {
    if (s + 1 < slabs) {
      load_a.fetch((s + 1) * kBK);
      load_b.fetch((s + 1) * kBK);
    }
    const int buf = s % 2;
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      float a[8], b[8];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 va = *reinterpret_cast<const float4*>(&sa[buf][k][row + 32 * h]);
        const float4 vb = *reinterpret_cast<const float4*>(&sb[buf][k][col + 16 * h]);
        a[4 * h] = va.x, a[4 * h + 1] = va.y, a[4 * h + 2] = va.z, a[4 * h + 3] = va.w;
        b[4 * h] = vb.x, b[4 * h + 1] = vb.y, b[4 * h + 2] = vb.z, b[4 * h + 3] = vb.w;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    if (s + 1 < slabs) {  // the other buffer was last read before the previous barrier
      load_a.stash(sa[1 - buf]);
      load_b.stash(sb[1 - buf]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + row + i % 4 + 32 * (i / 4);
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
      const int n = n0 + col + j % 4 + 16 * (j / 4);
      store_pair(C, ldc, m, n, N, alpha, beta, acc[i][j], acc[i][j + 1]);
    }
  }
}

template <bool TA, bool TB>
void launch(const GemmArgs& g, gpu::Stream stream) {
  sgemm_warp_tiles_kernel<TA, TB><<<tile_grid(g.M, g.N, kBM, kBN), kThreads, 0, stream>>>(
      g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc, vector_ok(g.A, g.lda),
      vector_ok(g.B, g.ldb));
  gpu::check_launch("sgemm_warp_tiles");
}

}  // namespace

void sgemm_warp_tiles(const GemmArgs& g, gpu::Stream stream) {
  for_layout(
      g, [&](auto ta, auto tb) { launch<decltype(ta)::value, decltype(tb)::value>(g, stream); });
}

}  // namespace crema::kernels::cuda::detail
