// The fp32 SIMT path's register tiles: each thread computes several elements of C, so a value it
// loads from shared memory feeds several FMAs.
//
// s4 column_tiles      s3 with 64x64 block tiles, 8-deep slabs and 512 threads, thread (ty, tx)
//                      computing rows 8ty .. 8ty+7 of column tx: per k it loads one B value and 8
//                      A values (broadcast: the warp shares ty) for 8 FMAs -- 9 shared loads for
//                      8 FMAs, where s3 needed 2 for 1.
// s5 micro_tiles       s4 with a 2-D micro-tile: 128x128 block tiles, 256 threads of 8x8 results,
//                      the thread's rows and columns in two groups of 4, 64 apart
//                      (block_tile.cuh's ThreadTile<Large>): per k 16 shared loads feed 64 FMAs.
//                      Scalar loads and stores; op(A) stored [m][k] in shared memory.
// s6 vector_fragments  s5 with op(A) stored k-major ([k][m], as op(B) is [k][n]): a thread's 4
//                      rows of a k step are adjacent, so its fragments are 2 float4 shared loads
//                      of A and 2 of B instead of 16 scalars (block_tile.cuh's multiply_slab).
//                      Global loads and stores still scalar, as in s5.
// s7 vector_loads      s6 with float4 global loads (where aligned) and stores: block_tile.cuh's
//                      loaders, slab by slab (load, barrier, multiply, barrier) -- s8 adds the
//                      prefetch.
//
// All four zero-fill past the edges of op(A) and op(B) and guard the stores, so every shape,
// transpose, leading dimension and alignment is accepted.
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/ladder/gemm_ladder_internal.h"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda::detail {
namespace {

// Element (o, k) of op(X) for an operand whose outer index o is m (op(A)) or n (op(B)): X stored
// [o][k] when K_CONTIGUOUS, else [k][o]; 0 outside the matrix.
template <bool K_CONTIGUOUS>
__device__ __forceinline__ float element(const float* X, int64_t ld, int o, int k, int outer,
                                         int K) {
  if (o >= outer || k >= K) return 0.0f;
  return K_CONTIGUOUS ? X[o * ld + k] : X[k * ld + o];
}

// Loads a BK x OUTER slab of an operand with THREADS threads, one scalar per thread and pass,
// consecutive threads along the contiguous side (coalesced), into slab(o, k).
template <int OUTER, int BK, int THREADS, bool K_CONTIGUOUS, class Slab>
__device__ __forceinline__ void load_scalar_slab(const float* X, int64_t ld, int o0, int k0,
                                                 int outer, int K, Slab&& slab) {
  static_assert(OUTER * BK % THREADS == 0, "whole passes");
#pragma unroll
  for (int pass = 0; pass < OUTER * BK / THREADS; ++pass) {
    const int e = int(threadIdx.x) + pass * THREADS;
    const int o = K_CONTIGUOUS ? e / BK : e % OUTER, k = K_CONTIGUOUS ? e % BK : e / OUTER;
    slab(o, k) = element<K_CONTIGUOUS>(X, ld, o0 + o, k0 + k, outer, K);
  }
}

// ---- s4: 1-D register tile ---------------------------------------------------------------------
namespace column {
constexpr int BM = 64, BN = 64, BK = 8, TM = 8, THREADS = BM / TM * BN;  // 512

template <bool TA, bool TB>
__global__ void __launch_bounds__(THREADS)
    kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
           const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
           int64_t ldc) {
  __shared__ float a[BM][BK + 1];  // a[m][k]; the +1 spreads a column of a over the banks
  __shared__ float b[BK][BN];      // b[k][n]
  const int tiles_n = (N + BN - 1) / BN;
  const int m0 = blockIdx.x / tiles_n * BM, n0 = blockIdx.x % tiles_n * BN;
  const int ty = threadIdx.x / BN, tx = threadIdx.x % BN;  // rows TM*ty .. +TM-1 of column tx
  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_scalar_slab<BM, BK, THREADS, !TA>(A, lda, m0, k0, M, K,
                                           [&](int m, int k) -> float& { return a[m][k]; });
    load_scalar_slab<BN, BK, THREADS, TB>(B, ldb, n0, k0, N, K,
                                          [&](int n, int k) -> float& { return b[k][n]; });
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float bk = b[k][tx];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] = fmaf(a[TM * ty + i][k], bk, acc[i]);
    }
    __syncthreads();
  }
  const int n = n0 + tx;
  if (n >= N) return;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + TM * ty + i;
    if (m < M) C[m * ldc + n] = blend(alpha, acc[i], beta, C + m * ldc + n);
  }
}
}  // namespace column

// ---- s5: 2-D register tile ---------------------------------------------------------------------
namespace micro {
using Cfg = tile::Large;  // 128 x 128 x 8, 8 x 8 per thread, 256 threads
constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;

template <bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS)
    kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
           const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
           int64_t ldc) {
  __shared__ float a[BM][BK + 1];           // a[m][k]
  __shared__ float b[BK][BN + tile::kPad];  // b[k][n]
  const int tiles_n = (N + BN - 1) / BN;
  const int m0 = blockIdx.x / tiles_n * BM, n0 = blockIdx.x % tiles_n * BN;
  const tile::ThreadTile<Cfg> t(threadIdx.x);
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_scalar_slab<BM, BK, Cfg::THREADS, !TA>(A, lda, m0, k0, M, K,
                                                [&](int m, int k) -> float& { return a[m][k]; });
    load_scalar_slab<BN, BK, Cfg::THREADS, TB>(B, ldb, n0, k0, N, K,
                                               [&](int n, int k) -> float& { return b[k][n]; });
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float af[TM], bf[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) af[i] = a[t.row(i)][k];
#pragma unroll
      for (int j = 0; j < TN; ++j) bf[j] = b[k][t.col(j)];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + t.row(i);
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = n0 + t.col(j);
      if (n < N) C[m * ldc + n] = blend(alpha, acc[i][j], beta, C + m * ldc + n);
    }
  }
}
}  // namespace micro

// ---- s6: k-major op(A), float4 fragments -------------------------------------------------------
namespace fragments {
using Cfg = tile::Large;

template <bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS)
    kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
           const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
           int64_t ldc) {
  __shared__ tile::SharedStorage<Cfg> sm;  // a[k][m] and b[k][n], rows 16-byte aligned
  const int tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  const int m0 = blockIdx.x / tiles_n * Cfg::BM, n0 = blockIdx.x % tiles_n * Cfg::BN;
  const tile::ThreadTile<Cfg> t(threadIdx.x);
  float acc[Cfg::TM][Cfg::TN] = {};
  for (int k0 = 0; k0 < K; k0 += Cfg::BK) {
    // s5's scalar loads, stored transposed for A: conflict-free, as the +4 padding of a row
    // puts k row r 4r banks on.
    load_scalar_slab<Cfg::BM, Cfg::BK, Cfg::THREADS, !TA>(
        A, lda, m0, k0, M, K, [&](int m, int k) -> float& { return sm.tiles.a[k][m]; });
    load_scalar_slab<Cfg::BN, Cfg::BK, Cfg::THREADS, TB>(
        B, ldb, n0, k0, N, K, [&](int n, int k) -> float& { return sm.tiles.b[k][n]; });
    __syncthreads();
    tile::multiply_slab(sm, t, acc);
    __syncthreads();
  }
  const DenseStore store{C, ldc, alpha, beta, false};  // scalar stores, as s5's
  tile::finish(sm, t, acc, m0, n0, M, N, store);
}
}  // namespace fragments

// ---- s7: float4 global loads and stores --------------------------------------------------------
namespace vectorized {
using Cfg = tile::Large;

template <bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS)
    kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
           const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C, int64_t ldc,
           bool vec_a, bool vec_b, bool vec_c) {
  __shared__ tile::SharedStorage<Cfg> sm;  // a[k][m] and b[k][n]
  const int tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  const int m0 = blockIdx.x / tiles_n * Cfg::BM, n0 = blockIdx.x % tiles_n * Cfg::BN;
  const int tid = threadIdx.x;
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, !TA> load_a{A, lda, m0, M, K, vec_a, tid, {}};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, TB> load_b{B, ldb, n0, N, K, vec_b, tid, {}};
  const tile::ThreadTile<Cfg> t(tid);
  float acc[Cfg::TM][Cfg::TN] = {};
  for (int k0 = 0; k0 < K; k0 += Cfg::BK) {
    load_a.fetch(k0);
    load_b.fetch(k0);
    load_a.stash(sm.tiles.a);
    load_b.stash(sm.tiles.b);
    __syncthreads();
    tile::multiply_slab(sm, t, acc);
    __syncthreads();
  }
  DenseStore store{C, ldc, alpha, beta, vec_c};
  tile::finish(sm, t, acc, m0, n0, M, N, store);
}
}  // namespace vectorized

}  // namespace

void sgemm_column_tiles(const GemmArgs& g, gpu::Stream stream) {
  for_layout(g, [&](auto ta, auto tb) {
    column::kernel<decltype(ta)::value, decltype(tb)::value>
        <<<tile_grid(g.M, g.N, column::BM, column::BN), column::THREADS, 0, stream>>>(
            g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  });
  gpu::check_launch("sgemm_column_tiles");
}

void sgemm_micro_tiles(const GemmArgs& g, gpu::Stream stream) {
  for_layout(g, [&](auto ta, auto tb) {
    micro::kernel<decltype(ta)::value, decltype(tb)::value>
        <<<tile_grid(g.M, g.N, micro::BM, micro::BN), micro::Cfg::THREADS, 0, stream>>>(
            g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  });
  gpu::check_launch("sgemm_micro_tiles");
}

void sgemm_vector_fragments(const GemmArgs& g, gpu::Stream stream) {
  using Cfg = fragments::Cfg;
  for_layout(g, [&](auto ta, auto tb) {
    fragments::kernel<decltype(ta)::value, decltype(tb)::value>
        <<<tile_grid(g.M, g.N, Cfg::BM, Cfg::BN), Cfg::THREADS, 0, stream>>>(
            g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  });
  gpu::check_launch("sgemm_vector_fragments");
}

void sgemm_vector_loads(const GemmArgs& g, gpu::Stream stream) {
  using Cfg = vectorized::Cfg;
  for_layout(g, [&](auto ta, auto tb) {
    vectorized::kernel<decltype(ta)::value, decltype(tb)::value>
        <<<tile_grid(g.M, g.N, Cfg::BM, Cfg::BN), Cfg::THREADS, 0, stream>>>(
            g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc,
            vector_ok(g.A, g.lda), vector_ok(g.B, g.ldb), vector_ok(g.C, g.ldc));
  });
  gpu::check_launch("sgemm_vector_loads");
}

}  // namespace crema::kernels::cuda::detail
