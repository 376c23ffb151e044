// CUDA GEMM: the fp32 SIMT versions v1-v4 and cuda::sgemm, the one entry point that checks the
// arguments and switches over every version (v5-v9 live in their own files, declared in
// gemm_cuda_internal.h). README.md has the ladder and its measurements.
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C      row-major, leading dimensions
//
// v1 naive           one thread per element of C; each FMA reads op(A) and op(B) from global
//                    memory (through L1/L2), so it is bound by load instructions, not FMAs.
// v2 shared_tiles    16x16 tiles of op(A) and op(B) in shared memory: a global read feeds 16 FMAs,
//                    but each FMA still needs two shared-memory loads.
// v3 register_tiles  128x128 block tiles, an 8x8 micro-tile per thread held in registers: 64 FMAs
//                    per 16 shared floats, float4 global loads where aligned, the next slab
//                    fetched while this one is multiplied (gemm_block_tile.cuh).
// v4 adaptive_tiles  v3's loop with the tile chosen per shape: the 64-row GEMMs of a small
//                    network get 16x16 or 32x32 tiles (enough blocks for 132 SMs), whose threads
//                    split k four ways inside the block and add their partial tiles in order.
// v5 warp_tiles      (gemm_warp_tiles_cuda.cu) v3 with warp-shaped thread groups, a 16-deep slab
//                    and two shared buffers (one barrier per slab).
// v6 tf32_mma        (gemm_mma_cuda.cu) tensor cores: mma.sync m16n8k8 on TF32-rounded operands,
//                    a 3-stage cp.async ring.
// v7 bf16_mma        (gemm_mma_cuda.cu) v6 with mma.sync m16n8k16 on bf16-rounded operands.
// v8 wgmma           (gemm_wgmma_sm90a.cu) sm_90a warpgroup MMA, TF32 or bf16, from swizzled
//                    shared memory filled through registers (rounding and transposing there).
// v9 wgmma_pipelined (gemm_wgmma_pipelined_sm90a.cu) v8 fed by TMA, 4 stages on mbarriers, a
//                    producer warpgroup and two consumers; TF32 truncated, NT only (else v8).
// v10 wgmma_repacked (gemm_wgmma_repacked_sm90a.cu) v9 for every layout and bf16 math: the
//                    operands it cannot read in place repacked K-major (bf16) into a workspace.
// v11 ffma_tuned     v4 whose 128x128 tile runs the loop of gemm_ffma_tuned_cuda.cu: two shared
//                    slabs (one barrier per slab), the next k step's fragments read during the
//                    FFMAs, edge-free loads for interior slabs; v4's smaller tiles unchanged.
//
// All versions are deterministic (no atomics; each sum's order depends on the shape only).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/tiles/block_tile.cuh"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {
namespace {

// op(A)[m,k] and op(B)[k,n] of row-major storage.
__device__ __forceinline__ float op_a(const float* A, int64_t lda, bool trans, int m, int k) {
  return trans ? A[k * lda + m] : A[m * lda + k];
}
__device__ __forceinline__ float op_b(const float* B, int64_t ldb, bool trans, int k, int n) {
  return trans ? B[n * ldb + k] : B[k * ldb + n];
}

// c = alpha * sum + beta * c, never reading c when beta == 0 (it may hold NaN).
__device__ __forceinline__ float blend(float alpha, float sum, float beta, const float* c) {
  return beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
}

// C = beta * C (alpha == 0 or K == 0: A and B are not read).
__global__ void scale_matrix(int M, int N, float beta, float* __restrict__ C, int64_t ldc) {
  const int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (index >= int64_t(M) * N) return;
  float* c = C + index / N * ldc + index % N;
  *c = beta == 0.0f ? 0.0f : beta * *c;
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

// v3 and v4: the block-tiled loop of gemm_block_tile.cuh on dense operands. Block b computes
// tile (b / tiles_n, b % tiles_n) of C. vec_* say a pointer is 16-byte aligned with a leading
// dimension that is a multiple of 4 (float4 access).
template <class Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS)
    sgemm_tiled(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
                const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
                int64_t ldc, bool vec_a, bool vec_b, bool vec_c) {
  __shared__ tile::SharedStorage<Cfg> sm;
  const int tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
  const int m0 = blockIdx.x / tiles_n * Cfg::BM, n0 = blockIdx.x % tiles_n * Cfg::BN;
  const int tid = threadIdx.x;
  // op(A)[m, k] is A[m*lda + k] (contiguous along k) or, transposed, A[k*lda + m].
  tile::DenseLoader<Cfg::BM, Cfg::BK, Cfg::THREADS, !TA> load_a{A, lda, m0, M, K, vec_a, tid};
  tile::DenseLoader<Cfg::BN, Cfg::BK, Cfg::THREADS, TB> load_b{B, ldb, n0, N, K, vec_b, tid};
  const tile::ThreadTile<Cfg> t(tid);
  float acc[Cfg::TM][Cfg::TN] = {};
  tile::accumulate(load_a, load_b, 0, K, sm, t, acc);
  auto store = [&](int m, int n, const float* v, int count) {
    float* c = C + m * ldc + n;
    if (count == 4 && vec_c) {
      float4 r =
          beta == 0.0f ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *reinterpret_cast<const float4*>(c);
      r.x = blend(alpha, v[0], beta, &r.x), r.y = blend(alpha, v[1], beta, &r.y);
      r.z = blend(alpha, v[2], beta, &r.z), r.w = blend(alpha, v[3], beta, &r.w);
      *reinterpret_cast<float4*>(c) = r;
    } else {
      for (int e = 0; e < count; ++e) c[e] = blend(alpha, v[e], beta, c + e);
    }
  };
  tile::finish(sm, t, acc, m0, n0, M, N, store);
}

bool vector_ok(const void* p, int64_t ld) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int blocks_for(int64_t count, int64_t per_block) {
  const int64_t blocks = ceil_div(count, per_block);
  CREMA_CHECK(blocks <= INT32_MAX, "sgemm: grid of " + std::to_string(blocks) + " blocks");
  return int(blocks);
}

template <class Cfg>
void launch_tiled(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  gpu::Stream stream) {
  const int blocks = blocks_for(ceil_div(M, Cfg::BM) * ceil_div(N, Cfg::BN), 1);
  const bool va = vector_ok(A, lda), vb = vector_ok(B, ldb), vc = vector_ok(C, ldc);
  if (!trans_a && !trans_b) {
    sgemm_tiled<Cfg, false, false><<<blocks, Cfg::THREADS, 0, stream>>>(
        M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, va, vb, vc);
  } else if (!trans_a && trans_b) {
    sgemm_tiled<Cfg, false, true><<<blocks, Cfg::THREADS, 0, stream>>>(
        M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, va, vb, vc);
  } else if (trans_a && !trans_b) {
    sgemm_tiled<Cfg, true, false><<<blocks, Cfg::THREADS, 0, stream>>>(
        M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, va, vb, vc);
  } else {
    sgemm_tiled<Cfg, true, true><<<blocks, Cfg::THREADS, 0, stream>>>(
        M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, va, vb, vc);
  }
  gpu::check_launch("sgemm_tiled");
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, GemmVersion version, GemmMath math, float* workspace) {
  if (!supports(version, math)) {
    throw Error(std::string("cuda::sgemm: version ") + gemm_version_name(version) +
                " does not compute in " + gemm_math_name(math) + " math");
  }
  CREMA_CHECK(M >= 0 && N >= 0 && K >= 0 && M < INT32_MAX && N < INT32_MAX && K < INT32_MAX,
              "cuda::sgemm: sizes M=" + std::to_string(M) + " N=" + std::to_string(N) +
                  " K=" + std::to_string(K));
  CREMA_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
              "cuda::sgemm: leading dimensions too small");
  if (M == 0 || N == 0) return;
  const int m = int(M), n = int(N), k = int(K);
  constexpr int kThreads = 256;
  if (K == 0 || alpha == 0.0f) {
    scale_matrix<<<blocks_for(M * N, kThreads), kThreads, 0, stream>>>(m, n, beta, C, ldc);
    gpu::check_launch("scale_matrix");
    return;
  }
  const detail::GemmArgs args{trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc};
  switch (version) {
    case GemmVersion::naive:
      sgemm_naive<<<blocks_for(M * N, kThreads), kThreads, 0, stream>>>(
          trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      gpu::check_launch("sgemm_naive");
      return;
    case GemmVersion::shared_tiles:
      sgemm_shared_tiles<<<blocks_for(ceil_div(M, kTile) * ceil_div(N, kTile), 1), kTile * kTile, 0,
                           stream>>>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                     ldc);
      gpu::check_launch("sgemm_shared_tiles");
      return;
    case GemmVersion::register_tiles:
      launch_tiled<tile::Large>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                stream);
      return;
    case GemmVersion::adaptive_tiles:
    case GemmVersion::ffma_tuned:
      switch (tile::choose_tile(M, N, 1, tile::TileShape::tiny)) {
        case tile::TileShape::large:
          if (version == GemmVersion::ffma_tuned) return detail::sgemm_ffma_tuned(args, stream);
          launch_tiled<tile::Large>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                    stream);
          return;
        case tile::TileShape::medium:
          launch_tiled<tile::Medium>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                     stream);
          return;
        case tile::TileShape::small:
          launch_tiled<tile::Small>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                    stream);
          return;
        case tile::TileShape::tiny:
          launch_tiled<tile::Tiny>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                   stream);
          return;
      }
      break;
    case GemmVersion::warp_tiles:
      return detail::sgemm_warp_tiles(args, stream);
    case GemmVersion::tf32_mma:
      return detail::gemm_mma(args, false, stream);
    case GemmVersion::bf16_mma:
      return detail::gemm_mma(args, true, stream);
    case GemmVersion::wgmma:
      return detail::gemm_wgmma(args, math == GemmMath::bf16, stream);
    case GemmVersion::wgmma_pipelined:
      return detail::gemm_wgmma_pipelined(args, stream);
    case GemmVersion::wgmma_repacked:
      return detail::gemm_wgmma_repacked(args, math == GemmMath::bf16, workspace, stream);
    default:
      break;
  }
  throw Error("cuda::sgemm: unknown version " + std::to_string(int(version)));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc, gpu::Stream stream, float* workspace) {
  if (M < 0 || N < 0 || K < 0 || M >= INT32_MAX || N >= INT32_MAX || K >= INT32_MAX) {
    throw Error("cuda::gemm_bf16: sizes M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + " must lie in [0, 2^31)");
  }
  if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N) {
    throw Error("cuda::gemm_bf16: leading dimensions lda=" + std::to_string(lda) +
                " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) +
                " too small for M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + (trans_a ? " (A^T)" : "") + (trans_b ? " (B^T)" : ""));
  }
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    constexpr int kThreads = 256;
    scale_matrix<<<blocks_for(M * N, kThreads), kThreads, 0, stream>>>(int(M), int(N), beta, C,
                                                                       ldc);
    gpu::check_launch("scale_matrix");
    return;
  }
  detail::gemm_bf16_repacked(trans_a, trans_b, int(M), int(N), int(K), alpha, A, lda, B, ldb, beta,
                             C, ldc, workspace, stream);
}

namespace detail {
bool device_is_sm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    throw DeviceError("cuda::sgemm: cannot read the compute capability of the current device");
  }
  return major == 9 && minor == 0;
}
}  // namespace detail

}  // namespace crema::kernels::cuda
