// GEMM: the general matrix multiply that convolution (im2col + GEMM) and inner-product layers
// stand on.
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N],   op(X) = X or X^T
//
// All matrices are row-major. A leading dimension is the distance, in elements, between the
// starts of two consecutive rows of the matrix as stored: A is stored [M,K] with lda >= K, or
// [K,M] with lda >= M when trans_a; B is stored [K,N] with ldb >= N, or [N,K] with ldb >= K when
// trans_b; C is stored [M,N] with ldc >= N.
//
// beta == 0 means C is write-only: its old contents (even NaN) are ignored, as in BLAS. alpha == 0
// (or K == 0) means A and B are not read: C = beta * C.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Three plain loops; the oracle of the tests. Accumulates in T (use double as the reference).
// Explicitly instantiated for float and double in gemm_ref.cpp.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);
}  // namespace ref

namespace cpu {
// Packed, cache-blocked, register-blocked GEMM (BLIS/GotoBLAS style) on up to `num_threads`
// OpenMP threads (values < 1 mean 1). The microkernel is chosen at run time from the CPU's
// instruction sets; see kernels/gemm/README.md for the design and its measurements.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           int num_threads);

// Which microkernel sgemm uses on this machine: "avx512", "avx2-fma" or "generic".
const char* sgemm_isa();
}  // namespace cpu

// CUDA SIMT (fp32 FFMA) versions, slowest to fastest; README.md has the ladder. Pointers are
// device pointers; the kernels are queued on `stream` (no host synchronization, no allocation:
// capturable in a CUDA graph). Every version is deterministic: each element of C is summed in an
// order fixed by the shape alone. M, N, K must be below 2^31.
namespace cuda {
enum class GemmVersion {
  naive = 1,       // v1: one thread per element of C, operands read straight from global memory
  shared_tiles,    // v2: 16x16 tiles of op(A) and op(B) staged in shared memory
  register_tiles,  // v3: 128x128 block tiles, an 8x8 micro-tile per thread, float4 loads
  adaptive_tiles,  // v4: v3 with the tile size chosen per shape; small tiles split k in the block
  best = adaptive_tiles,
};

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, GemmVersion version = GemmVersion::best);
}  // namespace cuda

// Tensor level: a is [M,K] ([K,M] when trans_a), b is [K,N] ([N,K] when trans_b), c is [M,N]; all
// 2-D, float32, contiguous and on the context's device. Throws crema::Error naming the shapes when
// they do not fit. Uses ctx.num_threads() CPU threads.
void gemm(Context& ctx, bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c);

}  // namespace crema::kernels
