// The block-tiled fp32 GEMM on dense operands: kernels/tiles/block_tile.cuh's loop with loaders
// that read op(A) and op(B) from row-major storage and a store that blends alpha and beta into C.
// Production instantiates it for s16's smaller tiles (gemm_cuda.cu), the ladder for s8's 128 x 128
// tile (ladder/gemm_ladder_cuda.cu); no tile is instantiated twice. s16's own loop
// (gemm_ffma_tuned_cuda.cu) takes the same parameters and shares the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda::detail {

// c = alpha * sum + beta * c, never reading c when beta == 0 (it may hold NaN).
__device__ __forceinline__ float blend(float alpha, float sum, float beta, const float* c) {
  return beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
}

// tile::finish's store on a dense C: C[m][n + e] = alpha * v[e] + beta * C[m][n + e] for e <
// count, one float4 when count == 4 and `vec` (C 16-byte aligned, ldc a multiple of 4).
struct DenseStore {
  float* C;
  int64_t ldc;
  float alpha, beta;
  bool vec;
  __device__ __forceinline__ void operator()(int m, int n, const float* v, int count) const {
    float* c = C + m * ldc + n;
    if (count == 4 && vec) {
      float4 r =
          beta == 0.0f ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *reinterpret_cast<const float4*>(c);
      r.x = blend(alpha, v[0], beta, &r.x), r.y = blend(alpha, v[1], beta, &r.y);
      r.z = blend(alpha, v[2], beta, &r.z), r.w = blend(alpha, v[3], beta, &r.w);
      *reinterpret_cast<float4*>(c) = r;
    } else {
      for (int e = 0; e < count; ++e) c[e] = blend(alpha, v[e], beta, c + e);
    }
  }
};

// Split K (gemm_cuda.cu's split plan): block row y of the grid sums the part k in
// [y * k_chunk, min(K_all, (y + 1) * k_chunk)) of the product into its own slice of C, y *
// split_stride floats in. An unsplit launch has one block row, k_chunk = K_all and a stride of 0,
// so the operands stay as they are. k_chunk is a multiple of 4: float4 alignment is kept.
template <bool TA, bool TB>
struct KSplitPart {
  int K;
  const float* A;
  const float* B;
  float* C;
  __device__ KSplitPart(int K_all, const float* A_all, int64_t lda, const float* B_all, int64_t ldb,
                        float* C_all, int k_chunk, int64_t split_stride) {
    const int64_t k0 = int64_t(blockIdx.y) * k_chunk;
    K = int(min(int64_t(K_all) - k0, int64_t(k_chunk)));
    A = A_all + (TA ? k0 * lda : k0);  // op(A)[m, k0]: row k0 of A^T, or column k0 of A
    B = B_all + (TB ? k0 : k0 * ldb);
    C = C_all + blockIdx.y * split_stride;
  }
};

// Block (b, y) computes tile (b / tiles_n, b % tiles_n) of C over split y's part of K. vec_* say a
// pointer can be read as float4s (vector_ok).
template <class Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS)
    sgemm_tiled_kernel(int M, int N, int K_all, float alpha, const float* __restrict__ A_all,
                       int64_t lda, const float* __restrict__ B_all, int64_t ldb, float beta,
                       float* __restrict__ C_all, int64_t ldc, bool vec_a, bool vec_b, bool vec_c,
                       int k_chunk, int64_t split_stride) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const KSplitPart<TA, TB> part(K_all, A_all, lda, B_all, ldb, C_all, k_chunk, split_stride);
  const int K = part.K;
  const float* __restrict__ A = part.A;
  const float* __restrict__ B = part.B;
  float* __restrict__ C = part.C;
  const int tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  const int m0 = blockIdx.x / tiles_n * Cfg::BM, n0 = blockIdx.x % tiles_n * Cfg::BN;
  const int tid = threadIdx.x;
  // op(A)[m, k] is A[m*lda + k] (contiguous along k) or, transposed, A[k*lda + m].
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, !TA> load_a{A, lda, m0, M, K, vec_a, tid};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, TB> load_b{B, ldb, n0, N, K, vec_b, tid};
  const tile::ThreadTile<Cfg> t(tid);
  float acc[Cfg::TM][Cfg::TN] = {};
  tile::accumulate(load_a, load_b, 0, K, sm, t, acc);
  DenseStore store{C, ldc, alpha, beta, vec_c};
  tile::finish(sm, t, acc, m0, n0, M, N, store);
}

// Queues a kernel with the parameters of the fp32 SIMT loops on dense operands (this file's and
// s16's, gemm_ffma_tuned_cuda.cu), one block of `threads` per bm x bn tile of C and per split of
// K (grid y).
template <class Kernel>
void launch_over_tiles(Kernel kernel, int bm, int bn, int threads, const GemmArgs& g,
                       const KSplit& split, gpu::Stream stream, const char* what) {
  const dim3 grid(unsigned(tile_grid(g.M, g.N, bm, bn)), unsigned(split.splits));
  kernel<<<grid, threads, 0, stream>>>(g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C,
                                       g.ldc, vector_ok(g.A, g.lda), vector_ok(g.B, g.ldb),
                                       vector_ok(g.C, g.ldc), split.splits > 1 ? split.chunk : g.K,
                                       split.splits > 1 ? split.stride : 0);
  gpu::check_launch(what);
}

// C = alpha op(A) op(B) + beta C on Cfg's tiles (with a split: each split's part into its slice).
template <class Cfg>
void sgemm_tiled(const GemmArgs& g, gpu::Stream stream, const KSplit& split = {}) {
  for_layout(g, [&](auto ta, auto tb) {
    launch_over_tiles(sgemm_tiled_kernel<Cfg, decltype(ta)::value, decltype(tb)::value>, Cfg::BM,
                      Cfg::BN, Cfg::THREADS, g, split, stream, "sgemm_tiled");
  });
}

}  // namespace crema::kernels::cuda::detail
