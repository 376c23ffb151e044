// The ladder's first rungs, fp32 SIMT, and ladder::sgemm, which runs any rung (production's
// through cuda::sgemm). README.md has what each step bought.
//
// v1 naive           one thread per element of C; each FMA reads op(A) and op(B) from global
//                    memory (through L1/L2), so it is bound by load instructions, not FMAs.
// v2 shared_tiles    16x16 tiles of op(A) and op(B) in shared memory: a global read feeds 16 FMAs,
//                    but each FMA still needs two shared-memory loads.
// v3 register_tiles  128x128 block tiles, an 8x8 micro-tile per thread held in registers: 64 FMAs
//                    per 16 shared floats, float4 global loads where aligned, the next slab
//                    fetched while this one is multiplied (kernels/tiles/block_tile.cuh).
// v4 adaptive_tiles  v3's loop with the tile chosen per shape: the 64-row GEMMs of a small
//                    network get 16x16 or 32x32 tiles (enough blocks for 132 SMs), whose threads
//                    split k four ways inside the block and add their partial tiles in order.
//                    Where it picks a smaller tile it is v11 (which kept those tiles), so only its
//                    128x128 tile runs here.
// v5 warp_tiles      (gemm_warp_tiles_cuda.cu) v3 with warp-shaped thread groups, a 16-deep slab
//                    and two shared buffers (one barrier per slab).
//
// All are deterministic (no atomics; each sum's order depends on the shape only).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/ladder/gemm_ladder.h"
#include "kernels/gemm/ladder/gemm_ladder_internal.h"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda::ladder {
namespace {

using detail::blend;
using detail::GemmArgs;

// op(A)[m,k] and op(B)[k,n] of row-major storage.
__device__ __forceinline__ float op_a(const float* A, int64_t lda, bool trans, int m, int k) {
  return trans ? A[k * lda + m] : A[m * lda + k];
}
__device__ __forceinline__ float op_b(const float* B, int64_t ldb, bool trans, int k, int n) {
  return trans ? B[n * ldb + k] : B[k * ldb + n];
}

// v1: thread (m, n) walks k; consecutive threads take consecutive n.
__global__ void sgemm_naive(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* __restrict__ A, int64_t lda, const float* __restrict__ B,
                            int64_t ldb, float beta, float* __restrict__ C, int64_t ldc) {
  const int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (index >= int64_t(M) * N) return;
  const int m = int(index / N), n = int(index % N);
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    sum = fmaf(op_a(A, lda, trans_a, m, k), op_b(B, ldb, trans_b, k, n), sum);
  }
  float* c = C + m * ldc + n;
  *c = blend(alpha, sum, beta, c);
}

// v2: v1 with kTile x kTile tiles of op(A) and op(B) staged in shared memory.
constexpr int kTile = 16;

__global__ void sgemm_shared_tiles(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                   const float* __restrict__ A, int64_t lda,
                                   const float* __restrict__ B, int64_t ldb, float beta,
                                   float* __restrict__ C, int64_t ldc) {
  __shared__ float a[kTile][kTile + 1];  // a[m][k]; the +1 keeps transposed stores conflict-free
  __shared__ float b[kTile][kTile + 1];  // b[k][n]
  const int tiles_n = (N + kTile - 1) / kTile;
  const int m0 = blockIdx.x / tiles_n * kTile, n0 = blockIdx.x % tiles_n * kTile;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Consecutive threads load consecutive addresses: along k for A, m for A^T, n for B, k for B^T.
    const int am = trans_a ? tx : ty, ak = trans_a ? ty : tx;
    a[am][ak] = m0 + am < M && k0 + ak < K ? op_a(A, lda, trans_a, m0 + am, k0 + ak) : 0.0f;
    const int bk = trans_b ? tx : ty, bn = trans_b ? ty : tx;
    b[bk][bn] = k0 + bk < K && n0 + bn < N ? op_b(B, ldb, trans_b, k0 + bk, n0 + bn) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) sum = fmaf(a[ty][k], b[k][tx], sum);
    __syncthreads();
  }
  if (m0 + ty < M && n0 + tx < N) {
    float* c = C + (m0 + ty) * ldc + n0 + tx;
    *c = blend(alpha, sum, beta, c);
  }
}

// v1's grid has a thread per element of C (no grid-stride loop), so it must fit a 1-D grid.
void run_naive(const GemmArgs& g, gpu::Stream stream) {
  const int64_t blocks = ceil_div(int64_t(g.M) * g.N, kThreads);
  if (blocks > INT32_MAX) {
    throw Error("cuda::ladder::sgemm (naive): " + std::to_string(blocks) +
                " blocks exceed a 1-D grid");
  }
  sgemm_naive<<<int(blocks), kThreads, 0, stream>>>(g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha,
                                                    g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  gpu::check_launch("sgemm_naive");
}

void run_shared_tiles(const GemmArgs& g, gpu::Stream stream) {
  sgemm_shared_tiles<<<detail::tile_grid(g.M, g.N, kTile, kTile), kTile * kTile, 0, stream>>>(
      g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  gpu::check_launch("sgemm_shared_tiles");
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, Rung rung, GemmMath math, float* workspace) {
  if (const std::optional<GemmVersion> version = production_version(rung)) {
    return cuda::sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream,
                       *version, math, workspace);
  }
  if (!supports(rung, math)) {
    throw Error(std::string("cuda::ladder::sgemm: version ") + name(rung) +
                " does not compute in " + gemm_math_name(math) + " math");
  }
  const std::optional<GemmArgs> args =
      detail::checked_args("cuda::ladder::sgemm", trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                           beta, C, ldc, stream);
  if (!args) return;
  switch (rung) {
    case Rung::naive:
      return run_naive(*args, stream);
    case Rung::shared_tiles:
      return run_shared_tiles(*args, stream);
    case Rung::register_tiles:
      return detail::sgemm_tiled<tile::Large>(*args, stream);
    case Rung::adaptive_tiles:
      if (tile::choose_tile(M, N, 1, tile::TileShape::tiny) == tile::TileShape::large) {
        return detail::sgemm_tiled<tile::Large>(*args, stream);
      }
      return cuda::sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream,
                         GemmVersion::ffma_tuned, math);
    case Rung::warp_tiles:
      return detail::sgemm_warp_tiles(*args, stream);
    default:
      break;
  }
  throw Error("cuda::ladder::sgemm: unknown version " + std::to_string(number(rung)));
}

size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Rung rung,
                       GemmMath math) {
  const std::optional<GemmVersion> version = production_version(rung);
  return version ? cuda::sgemm_workspace(trans_a, trans_b, M, N, K, *version, math) : 0;
}

}  // namespace crema::kernels::cuda::ladder
