// The fp32 SIMT path from s9 to s13: s8's loop (128 x 128 block tiles, 8-deep slabs, 256 threads
// of 8 x 8 results, float4 loads, the next slab prefetched into registers) with, one at a time:
//
// s9 double_buffer      two shared slabs: slab s+1, fetched into registers during slab s's FFMAs,
//                       is stored into the other buffer afterwards, so the loop needs one barrier
//                       per slab instead of s8's two (no barrier before the store: nobody reads
//                       that buffer until the barrier that ends this slab).
// s10 warp_tiles        the threads laid out by warp: warps 4 (m) x 2 (n), each a 32 x 64 patch
//                       of C, lane (lane / 8, lane % 8) owning two 4-row groups 16 apart and two
//                       4-column groups 32 apart. Per k a warp reads 4 distinct float4s of the A
//                       slab and 8 of B (s9: 2 and 16 for a 16 x 128 strip), and its 32 x 64
//                       outputs need 96 operand values per k where s9's strip needs 144.
// s11 grouped_tiles     blocks walk the tiles of C in groups of 8 tile rows (tile_common.cuh's
//                       grouped_tile) instead of row by row: the blocks running at once cover a
//                       squarer patch of C, so the panels of A and B they share come from L2.
// s12 fragment_prefetch two register fragments: step k+1's are read from shared memory while
//                       step k's FFMAs run, so the FFMAs no longer wait on shared memory. The
//                       next slab is stored just before the last k step, behind the slab's one
//                       barrier, so that the last step's FFMAs cover the read of the next slab's
//                       first fragments.
// s13 two_blocks_per_sm __launch_bounds__(256, 2): at most 128 registers a thread, so two blocks
//                       of 256 threads fit an SM's 64K registers and one block's barrier no
//                       longer idles the SM.
//
//   block tile (s9)                     block tile (s10-s13)
//   thread (ty, tx), ty, tx < 16        warp w = 0..7: rows 32 (w / 2), columns 64 (w % 2)
//   rows    4ty + {0..3} + {0, 64}      lane l: rows    4 (l / 8) + {0..3} + {0, 16}
//   columns 4tx + {0..3} + {0, 64}              columns 4 (l % 8) + {0..3} + {0, 32}
//
// s14 (../gemm_ffma_tuned_cuda.cu, production's loop) is s13 with edge-free loads for the slabs
// inside C. The loaders are s7's (kernels/tiles/block_tile.cuh: zero-fill past the edges, scalar
// fallback for unaligned operands), so every shape, transpose, leading dimension and alignment is
// accepted.
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/ladder/gemm_ladder_internal.h"
#include "kernels/tiles/block_tile.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256;
constexpr int kStride = kBM + tile::kPad;  // shared slab row: 128 floats + 4 of padding

// Where a thread's two 4 x 4 groups of rows and columns lie in the block tile: first row and
// column, and the distance to the second group.
struct BlockLayout {  // s9: block_tile.cuh's ThreadTile<Large>, 16 x 16 threads
  static constexpr int STEP_M = 64, STEP_N = 64;
  __device__ static int row(int tid) { return tid / 16 * 4; }
  __device__ static int col(int tid) { return tid % 16 * 4; }
};
struct WarpLayout {  // s10-s13: warps 4 x 2 of 32 x 64, lanes 4 x 8
  static constexpr int STEP_M = 16, STEP_N = 32;
  __device__ static int row(int tid) { return tid / 32 / 2 * 32 + tid % 32 / 8 * 4; }
  __device__ static int col(int tid) { return tid / 32 % 2 * 64 + tid % 32 % 8 * 4; }
};

// A thread's fragments of step k of a slab: its 8 rows of sa[k] and 8 columns of sb[k].
template <class Layout>
__device__ __forceinline__ void load_fragments(const float (&sa)[kBK][kStride],
                                               const float (&sb)[kBK][kStride], int k, int row,
                                               int col, float (&a)[8], float (&b)[8]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float4 va = *reinterpret_cast<const float4*>(&sa[k][row + Layout::STEP_M * h]);
    const float4 vb = *reinterpret_cast<const float4*>(&sb[k][col + Layout::STEP_N * h]);
    a[4 * h] = va.x, a[4 * h + 1] = va.y, a[4 * h + 2] = va.z, a[4 * h + 3] = va.w;
    b[4 * h] = vb.x, b[4 * h + 1] = vb.y, b[4 * h + 2] = vb.z, b[4 * h + 3] = vb.w;
  }
}

__device__ __forceinline__ void outer_product(const float (&a)[8], const float (&b)[8],
                                              float (&acc)[8][8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

// PREFETCH: s12's two register fragments; MIN_BLOCKS: 2 for s13's register cap.
template <class Layout, bool GROUPED, bool PREFETCH, int MIN_BLOCKS, bool TA, bool TB>
__global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
    sgemm_double_buffer_kernel(int M, int N, int K, float alpha, const float* __restrict__ A,
                               int64_t lda, const float* __restrict__ B, int64_t ldb, float beta,
                               float* __restrict__ C, int64_t ldc, bool vec_a, bool vec_b,
                               bool vec_c) {
  __shared__ __align__(16) float sa[2][kBK][kStride];  // op(A) slabs, k-major: sa[.][k][m]
  __shared__ __align__(16) float sb[2][kBK][kStride];  // op(B) slabs: sb[.][k][n]
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  const TileCoord tile = GROUPED ? grouped_tile(blockIdx.x, tiles_m, tiles_n, 8)
                                 : TileCoord{int(blockIdx.x) / tiles_n, int(blockIdx.x) % tiles_n};
  const int m0 = tile.m * kBM, n0 = tile.n * kBN;
  const int tid = threadIdx.x, row = Layout::row(tid), col = Layout::col(tid);

  tile::DenseLoader<kBM, kBK, kThreads, !TA> load_a{A, lda, m0, M, K, vec_a, tid, {}};
  tile::DenseLoader<kBN, kBK, kThreads, TB> load_b{B, ldb, n0, N, K, vec_b, tid, {}};
  const int slabs = (K + kBK - 1) / kBK;
  load_a.fetch(0);
  load_b.fetch(0);
  load_a.stash(sa[0]);
  load_b.stash(sb[0]);
  __syncthreads();

  float acc[8][8] = {};
  if constexpr (!PREFETCH) {  // s9-s11: a step's fragments read just before its FFMAs
    for (int s = 0; s < slabs; ++s) {
      if (s + 1 < slabs) {
        load_a.fetch((s + 1) * kBK);
        load_b.fetch((s + 1) * kBK);
      }
      const int buf = s % 2;
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        float a[8], b[8];
        load_fragments<Layout>(sa[buf], sb[buf], k, row, col, a, b);
        outer_product(a, b, acc);
      }
      if (s + 1 < slabs) {  // the other buffer was last read before the previous barrier
        load_a.stash(sa[1 - buf]);
        load_b.stash(sb[1 - buf]);
      }
      __syncthreads();
    }
  } else {  // s12, s13: fragments f = k % 2 multiplied while fragments 1 - f are read
    float fa[2][8], fb[2][8];
    load_fragments<Layout>(sa[0], sb[0], 0, row, col, fa[0], fb[0]);
    for (int s = 0; s < slabs; ++s) {
      const int buf = s % 2;
      const bool more = s + 1 < slabs;
      if (more) {
        load_a.fetch((s + 1) * kBK);
        load_b.fetch((s + 1) * kBK);
      }
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        const int f = k % 2, next = 1 - f;
        if (k + 1 < kBK) {
          load_fragments<Layout>(sa[buf], sb[buf], k + 1, row, col, fa[next], fb[next]);
        } else if (more) {
          // Every thread passed the previous slab's barrier, after its last read of the other
          // buffer: refill it, then read the next slab's first fragments behind this barrier.
          load_a.stash(sa[1 - buf]);
          load_b.stash(sb[1 - buf]);
          __syncthreads();
          load_fragments<Layout>(sa[1 - buf], sb[1 - buf], 0, row, col, fa[next], fb[next]);
        }
        outer_product(fa[f], fb[f], acc);
      }
    }
  }

  const DenseStore store{C, ldc, alpha, beta, vec_c};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + row + i % 4 + Layout::STEP_M * (i / 4);
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + col + Layout::STEP_N * h;
      if (n >= N) continue;
      const float v[4] = {acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]};
      store(m, n, v, N - n < 4 ? N - n : 4);
    }
  }
}

template <class Layout, bool GROUPED, bool PREFETCH, int MIN_BLOCKS>
void launch(const GemmArgs& g, gpu::Stream stream) {
  for_layout(g, [&](auto ta, auto tb) {
    sgemm_double_buffer_kernel<Layout, GROUPED, PREFETCH, MIN_BLOCKS, decltype(ta)::value,
                               decltype(tb)::value>
        <<<tile_grid(g.M, g.N, kBM, kBN), kThreads, 0, stream>>>(
            g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc,
            vector_ok(g.A, g.lda), vector_ok(g.B, g.ldb), vector_ok(g.C, g.ldc));
  });
  gpu::check_launch("sgemm_double_buffer");
}

}  // namespace

void sgemm_double_buffer(const GemmArgs& g, DoubleBufferStep step, gpu::Stream stream) {
  switch (step) {
    case DoubleBufferStep::double_buffer:
      return launch<BlockLayout, false, false, 1>(g, stream);
    case DoubleBufferStep::warp_tiles:
      return launch<WarpLayout, false, false, 1>(g, stream);
    case DoubleBufferStep::grouped_tiles:
      return launch<WarpLayout, true, false, 1>(g, stream);
    case DoubleBufferStep::fragment_prefetch:
      return launch<WarpLayout, true, true, 1>(g, stream);
    case DoubleBufferStep::two_blocks_per_sm:
      return launch<WarpLayout, true, true, 2>(g, stream);
  }
}

}  // namespace crema::kernels::cuda::detail
