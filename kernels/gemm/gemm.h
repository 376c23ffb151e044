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

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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

// CUDA versions; README.md has the ladder. Pointers are device pointers; the kernels are queued
// on `stream` (no host synchronization, no allocation: capturable in a CUDA graph). Every version
// is deterministic: each element of C is summed in an order fixed by the shape alone. M, N, K must
// be below 2^31.
namespace cuda {

// The arithmetic of a product. Operands and C stay fp32 in memory in every mode; the modes differ
// in what the multiplier sees. fp32: true fp32 FFMA (the default). tf32: tensor cores on operands
// rounded to TF32 (10-bit mantissa, as cuDNN/cuBLAS's opt-in TF32), fp32 accumulation. bf16:
// tensor cores on operands rounded to bf16 (7-bit mantissa), fp32 accumulation.
enum class GemmMath { fp32, tf32, bf16 };
// "fp32", "tf32", "bf16" (as YAML and `crema bench --math` spell them), and back (nullopt:
// unknown).
const char* gemm_math_name(GemmMath math);
std::optional<GemmMath> gemm_math_from_name(const std::string& name);

// The versions production runs, labelled as README.md's ladder (s16, t1-t5; values: the old
// v6-v11, nothing depends on them); the other rungs live in ladder/ (cuda::ladder::sgemm runs all).
enum class GemmVersion {
  tf32_mma = 6,       // t1: tensor cores, mma.sync m16n8k8 TF32, cp.async 3-stage pipeline (tf32)
  bf16_mma,           // t2: t1 with mma.sync m16n8k16 on bf16 fragments (bf16)
  wgmma,              // t3: sm_90a warpgroup MMA from 128B-swizzled shared memory (tf32 or bf16)
  wgmma_pipelined,    // t4: t3 fed by TMA through a 4-stage mbarrier ring, producer/consumer warps
  wgmma_repacked,     // t5: t4 for every layout and bf16 math: operands repacked K-major first
  ffma_tuned,         // s16: adaptive tiles, a double-buffered 128x128 loop, K split for small C
  wgmma_in_place,     // gemm_16bit only: t4's kernel reading MN-major 16-bit operands in place
  best = ffma_tuned,  // fp32's production version; see best_version for the others
};
// Its name as `crema bench` spells it ("ffma_tuned").
const char* gemm_version_name(GemmVersion version);
// Whether `version` computes in `math`: t1 tf32, t2 bf16, t3 tf32 and bf16, t4 tf32, t5 tf32 and
// bf16, s16 fp32; wgmma_in_place in none (it reads 16-bit operands: cuda::gemm_16bit only).
bool supports(GemmVersion version, GemmMath math);
// The version production uses for `math`: s16 (fp32), t1 (tf32), t2 (bf16); README.md has the
// measurements behind the choice (t3 loses to t1/t2 on most shapes so far).
GemmVersion best_version(GemmMath math);

// C = alpha op(A) op(B) + beta C in `math` with `version`. Throws crema::Error when `version`
// does not compute in `math` (supports) or cannot run on the current device (t3 needs compute
// capability 9.0). Any shape, leading dimension and alignment is accepted by every version.
// t4 truncates its operands to TF32 (the tensor cores' own reading of an fp32 word) where every
// other TF32 path rounds to nearest; it runs only NT calls with 16-byte aligned A and B and lda,
// ldb, K multiples of 4, and hands any other call to t3 (which rounds).
// t5 first copies the operands t4 cannot read in place into `workspace` (at least
// sgemm_workspace(...) floats, 16-byte aligned), K-major, and as bf16 in bf16 math (rounded to
// nearest even), then runs t4's kernel; TF32 operands are copied unchanged (truncated, as t4).
// Without a workspace where one is needed (nullptr), or with an operand it would read in place
// that is not 16-byte aligned with a leading dimension that is a multiple of 4, t5 runs t4
// (tf32) or t3 (bf16).
// s16 splits K over the grid when C has too few tiles to occupy the GPU and K is long (a weight
// gradient): each split's partial product goes to `workspace` (sgemm_workspace(...) floats), a
// second pass adds them in split order. Without a workspace (nullptr) it runs unsplit. Every other
// version ignores `workspace`.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           gpu::Stream stream, GemmVersion version = GemmVersion::best,
           GemmMath math = GemmMath::fp32, float* workspace = nullptr);
// The floats of workspace sgemm wants for this call (0: none): t5 copies an operand that is
// MN-major (A when trans_a, B when !trans_b), every operand in bf16 math, and both when K is not a
// multiple of 4, to rows of K rounded up to 4 (TF32) or 8 (bf16) elements, and, for a C whose
// 128 x 256 tiles fill less than half the SMs with a long K, keeps one M x N fp32 part per split
// of K after them (on the current device: the split depends on its SM count); s16 keeps one M x N
// partial product per split of K when it splits.
size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                       GemmVersion version, GemmMath math);
// The production version for this shape on the current device: t5 in tf32 and bf16 for large
// products (M, N >= 1024, K >= 256, MNK >= 2^30) on compute capability 9.0, where its copy passes
// cost little against the product (README.md has the measurements), and for skinny ones with a
// long K (at most a quarter as many 128 x 128 tiles of C as SMs, K >= 4096: a weight gradient),
// where its split of K fills the GPU; else best_version(math).
// Callers run it with sgemm_workspace(...) floats of workspace.
GemmVersion best_version(GemmMath math, int64_t M, int64_t N, int64_t K);

// C = alpha op(A) op(B) + beta C with bf16 operands in memory (bf16 bit patterns, as
// torch.bfloat16 stores them), C fp32, layouts as in sgemm. Tensor cores multiply the operands as
// stored, fp32 accumulation; t4's kernel (TMA-fed wgmma), so it needs compute capability 9.0.
// An operand t4 reads in place (A when !trans_a, B when trans_b) must be 16-byte aligned with a
// leading dimension that is a multiple of 8; the others (MN-major ones, and both when K is not a
// multiple of 8) are first transposed into `workspace` (gemm_bf16_workspace(...) floats, 16-byte
// aligned; nullptr is fine where none is needed). Anything else throws crema::Error, as does
// another device.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc, gpu::Stream stream, float* workspace = nullptr);
// The floats of workspace gemm_bf16 wants for this call (0 for NT with K a multiple of 8).
size_t gemm_bf16_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K);

// C = alpha op(A) op(B) + bias[n] + beta C with A and B 16-bit in memory (`operands`: bf16 or
// f16 bit patterns, as torch stores them), C f32 or the operands' type (`c_type`), layouts as in
// sgemm; bias fp32 [N] or null. Tensor cores multiply the operands as stored with fp32
// accumulation; a 16-bit C is rounded once (to nearest even) from the fp32 result, and read
// (widened) when beta != 0. `version`:
//   wgmma_in_place (compute capability 9.0; best_16bit_version's): t4's kernel reads both operands
//     where they lie, MN-major ones too (A stored [K,M], B stored [K,N]: wgmma's transpose bits),
//     any M, N, K. An operand whose leading dimension is not a multiple of 8 is copied K-major into
//     `workspace` first (the fallback: a tensor map's rows are 16-byte multiples); one read in
//     place must be 16-byte aligned (else crema::Error). Splits K as wgmma_repacked does; unsplit,
//     a persistent grid (one block per SM walking several tiles).
//   wgmma_repacked (compute capability 9.0): t5's way. MN-major operands (and both when K is not
//     a multiple of 8) are copied K-major into `workspace`, then t4's kernel runs; an operand read
//     in place must be 16-byte aligned with a leading dimension that is a multiple of 8. A product
//     with fewer 128 x 256 tiles of C than the GPU has SMs and a long K (a weight gradient) splits
//     K over the grid into fp32 parts in `workspace`, added in split order (deterministic).
//   bf16_mma (bf16 operands) or tf32_mma (bf16 or f16; TF32 holds f16 exactly), on any GPU: both
//     operands widened to fp32 in `workspace`, then t2 or t1.
// `workspace` holds gemm_16bit_workspace(...) floats, 16-byte aligned (nullptr where that is 0).
// Throws crema::Error naming the dtypes, version, sizes or operand that do not fit.
void gemm_16bit(DType operands, DType c_type, bool trans_a, bool trans_b, int64_t M, int64_t N,
                int64_t K, float alpha, const void* A, int64_t lda, const void* B, int64_t ldb,
                float beta, void* C, int64_t ldc, const float* bias, gpu::Stream stream,
                GemmVersion version, float* workspace);
// The floats of workspace gemm_16bit wants for this call on the current device (the split of K
// depends on its SM count; lda, ldb 0: packed operands, trans_a ? M : K and trans_b ? K : N), and
// how many splits of K it runs (1: none). wgmma_in_place wants none for packed operands whose
// rows are multiples of 8 elements, unless it splits K.
size_t gemm_16bit_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            GemmVersion version, int64_t lda = 0, int64_t ldb = 0);
int gemm_16bit_splits(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      GemmVersion version);
// wgmma_in_place on compute capability 9.0; elsewhere bf16_mma (bf16) or tf32_mma (f16).
GemmVersion best_16bit_version(DType operands);
}  // namespace cuda

// Tensor level: a is [M,K] ([K,M] when trans_a), b is [K,N] ([N,K] when trans_b), c is [M,N]; all
// 2-D, contiguous and on the context's device. a and b of one dtype:
//   f32 (c f32): cpu::sgemm on ctx.num_threads() threads, or cuda::sgemm; `math` picks the
//     arithmetic on a GPU (cuda::best_version(math, M, N, K), its workspace from ctx.workspace());
//     the CPU always computes in fp32, which is at least as exact.
//   f64 (c f64) on the CPU: ref::gemm<double>, the tests' oracle.
//   bf16 or f16 (c f32 or the same 16-bit type): cuda::gemm_16bit (best_16bit_version, fp32
//     accumulation whatever `math` says: the operands are already 16-bit); on the CPU the
//     reference: operands widened exactly, products summed in double, c rounded once.
// `bias` (optional: [N], f32 for 16-bit operands, else a's dtype) is added to every row of the
// product: c = alpha op(a) op(b) + bias + beta c. Throws crema::Error naming the shapes or dtypes
// when they do not fit.
void gemm(Context& ctx, bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c, cuda::GemmMath math = cuda::GemmMath::fp32,
          const Tensor* bias = nullptr);

// The bytes of the context's workspace gemm takes on `device` for that call (operands of dtype
// `operands`): what a layer reports as Layer::workspace_bytes. 0 on the CPU, and for a GPU this
// host does not have (the plans depend on its SM count and compute capability).
size_t gemm_workspace_bytes(const Device& device, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, DType operands, cuda::GemmMath math = cuda::GemmMath::fp32);

}  // namespace crema::kernels
