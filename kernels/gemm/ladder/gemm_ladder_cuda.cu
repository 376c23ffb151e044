// The fp32 SIMT path's first rungs and ladder::sgemm, which runs any rung (production's through
// cuda::sgemm). README.md has the ladder's table: what each step bought and what limits the next.
//
// s1 uncoalesced       one thread per element of C, its k loop reading op(A) and op(B) from
//                      global memory; consecutive threads take consecutive rows m, so (A not
//                      transposed) a warp's 32 loads of A[m][k] touch 32 cache lines, and its
//                      32 stores 32 rows of C.
// s2 coalesced         consecutive threads take consecutive columns n: a warp reads 128
//                      contiguous bytes of B, one broadcast word of A, and writes 128 bytes of C.
//                      Still two global loads per FMA: bound by load instructions.
// s3 shared_tiles      16x16 tiles of op(A) and op(B) staged in shared memory: a global load feeds
//                      16 FMAs, but every FMA still needs two shared-memory loads.
// s4-s7                (gemm_register_tiles_cuda.cu) register tiles: 1-D, 2-D, float4 fragments,
//                      float4 global loads.
// s8 register_prefetch s7 with the next slab loaded into registers while this one is multiplied
//                      (../gemm_tiled.cuh on the 128x128 tile: kernels/tiles/block_tile.cuh).
// s9-s13               (gemm_double_buffer_cuda.cu) two shared slabs, warp tiles, tile order,
//                      fragment prefetch, two blocks per SM.
// s14 edge_free_loads  production's 128x128 loop (../gemm_ffma_tuned_cuda.cu) on every shape.
// s15 adaptive_tiles   production's choice of tile per shape (tile::choose_tile), without the
//                      split of K: cuda::sgemm(ffma_tuned) with no workspace.
// s16 and t1-t5        production's versions, through cuda::sgemm.
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

// s1: thread index i computes C[i % M][i / M]: the thread index walks down a column.
__global__ void sgemm_uncoalesced(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float* __restrict__ A, int64_t lda,
                                  const float* __restrict__ B, int64_t ldb, float beta,
                                  float* __restrict__ C, int64_t ldc) {
  const int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (index >= int64_t(M) * N) return;
  const int m = int(index % M), n = int(index / M);
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    sum = fmaf(op_a(A, lda, trans_a, m, k), op_b(B, ldb, trans_b, k, n), sum);
  }
  float* c = C + m * ldc + n;
  *c = blend(alpha, sum, beta, c);
}

// s2: s1 with the thread index walking along a row: C[i / N][i % N].
__global__ void sgemm_coalesced(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                const float* __restrict__ A, int64_t lda,
                                const float* __restrict__ B, int64_t ldb, float beta,
                                float* __restrict__ C, int64_t ldc) {
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

// s3: s2 with kTile x kTile tiles of op(A) and op(B) staged in shared memory.
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

// s1's and s2's grid has a thread per element of C (no grid-stride loop): a 1-D grid must hold it.
template <class Kernel>
void run_per_element(Kernel kernel, const GemmArgs& g, gpu::Stream stream, const char* what) {
  const int64_t blocks = ceil_div(int64_t(g.M) * g.N, kThreads);
  if (blocks > INT32_MAX) {
    throw Error(std::string("cuda::ladder::sgemm (") + what + "): " + std::to_string(blocks) +
                " blocks exceed a 1-D grid");
  }
  kernel<<<int(blocks), kThreads, 0, stream>>>(g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A,
                                               g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  gpu::check_launch(what);
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
    case Rung::uncoalesced:
      return run_per_element(sgemm_uncoalesced, *args, stream, "sgemm_uncoalesced");
    case Rung::coalesced:
      return run_per_element(sgemm_coalesced, *args, stream, "sgemm_coalesced");
    case Rung::shared_tiles:
      return run_shared_tiles(*args, stream);
    case Rung::column_tiles:
      return detail::sgemm_column_tiles(*args, stream);
    case Rung::micro_tiles:
      return detail::sgemm_micro_tiles(*args, stream);
    case Rung::vector_fragments:
      return detail::sgemm_vector_fragments(*args, stream);
    case Rung::vector_loads:
      return detail::sgemm_vector_loads(*args, stream);
    case Rung::register_prefetch:
      return detail::sgemm_tiled<tile::Large>(*args, stream);
    case Rung::double_buffer:
      return detail::sgemm_double_buffer(*args, detail::DoubleBufferStep::double_buffer, stream);
    case Rung::warp_tiles:
      return detail::sgemm_double_buffer(*args, detail::DoubleBufferStep::warp_tiles, stream);
    case Rung::grouped_tiles:
      return detail::sgemm_double_buffer(*args, detail::DoubleBufferStep::grouped_tiles, stream);
    case Rung::fragment_prefetch:
      return detail::sgemm_double_buffer(*args, detail::DoubleBufferStep::fragment_prefetch,
                                         stream);
    case Rung::two_blocks_per_sm:
      return detail::sgemm_double_buffer(*args, detail::DoubleBufferStep::two_blocks_per_sm,
                                         stream);
    case Rung::edge_free_loads:
      return detail::sgemm_ffma_tuned(*args, stream);
    case Rung::adaptive_tiles:
      return cuda::sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream,
                         GemmVersion::ffma_tuned, math);
    default:
      break;
  }
  throw Error("cuda::ladder::sgemm: unknown rung " + label(rung));
}

size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Rung rung,
                       GemmMath math) {
  const std::optional<GemmVersion> version = production_version(rung);
  return version ? cuda::sgemm_workspace(trans_a, trans_b, M, N, K, *version, math) : 0;
}

}  // namespace crema::kernels::cuda::ladder
