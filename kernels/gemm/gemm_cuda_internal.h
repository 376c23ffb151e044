// Launchers of the production CUDA GEMM versions that live in their own files (t1-t5, s16), called
// by cuda::sgemm's switch in gemm_cuda.cu, and the host helpers they and the ladder's versions
// (ladder/) share. No CUDA header needed. A launcher's arguments are those of cuda::sgemm, already
// checked there (checked_args: sizes below 2^31, leading dimensions large enough, M, N, K >= 1
// and alpha != 0).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/cuda_runtime.h"

namespace crema::kernels::cuda::detail {

struct GemmArgs {
  bool trans_a, trans_b;
  int M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
};

// A split of K over the grid's y dimension (s16's split plan, gemm_cuda.cu): `splits` block rows,
// each summing `chunk` consecutive values of k (a multiple of 4; the last row what is left) into
// its own M x N slice of the output, `stride` floats past the previous one. The default: no split.
struct KSplit {
  int splits = 1;
  int chunk = 0;
  int64_t stride = 0;
};

// s16's split of K for an M x N x K product (gemm_cuda.cu): none (splits == 1) while C's tiles
// occupy the GPU or K is short; else enough splits for about two blocks per SM, stride M * N, each
// summing at least a few hundred k. A function of the shape alone, so the order of every sum is
// too. Its workspace is splits * M * N floats when splits > 1.
KSplit ffma_split(int64_t M, int64_t N, int64_t K);

// cuda::sgemm's checks and its cases without a product, for every entry point that runs a
// version: throws crema::Error naming `who` for a size of 2^31 or more or a leading dimension too
// small; queues C = beta C when K == 0 or alpha == 0. Returns the arguments a version's launcher
// takes, or nullopt when nothing is left to do.
std::optional<GemmArgs> checked_args(const char* who, bool trans_a, bool trans_b, int64_t M,
                                     int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                                     gpu::Stream stream);

// The 1-D grid of one block per bm x bn tile of an M x N product; throws crema::Error when the
// tiles exceed a grid's 2^31 - 1 blocks.
int tile_grid(int M, int N, int bm, int bn);

// Calls f(std::bool_constant<trans_a>, std::bool_constant<trans_b>): the launchers make the
// transposes template arguments, one kernel per layout, and this is their one switch over it.
template <class F>
void for_layout(const GemmArgs& g, F&& f) {
  if (!g.trans_a && !g.trans_b) return f(std::false_type{}, std::false_type{});
  if (g.trans_a && !g.trans_b) return f(std::true_type{}, std::false_type{});
  if (!g.trans_a && g.trans_b) return f(std::false_type{}, std::true_type{});
  f(std::true_type{}, std::true_type{});
}

// Whether a float operand can be read as float4s: 16-byte aligned, leading dimension a multiple
// of 4 (every row then starts 16-byte aligned too).
inline bool vector_ok(const void* p, int64_t ld) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % 4 == 0;
}

// s16's 128 x 128 tile (gemm_ffma_tuned_cuda.cu): fp32 SIMT with double-buffered shared slabs and
// register fragments, for any shape (cuda::sgemm runs it where s15 would pick its 128 x 128 tile).
// With a split (gemm_tiled.cuh: KSplitPart), block row y writes its part into args.C + y *
// split.stride.
void sgemm_ffma_tuned(const GemmArgs& args, gpu::Stream stream, const KSplit& split = {});
// t1 / t2: mma.sync tensor cores, TF32 (bf16 == false) or bf16 operands (gemm_mma_cuda.cu).
void gemm_mma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// t3: wgmma on sm_90a (gemm_wgmma_cuda.cu); throws crema::Error on any other device.
void gemm_wgmma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// t4: wgmma fed by TMA through an mbarrier ring, TF32 (gemm_wgmma_pipelined_sm90a.cu). NT calls
// with 16-byte aligned operands and lda, ldb, K multiples of 4 run it; any other call runs t3.
void gemm_wgmma_pipelined(const GemmArgs& args, gpu::Stream stream);
// t4's kernel on K-major operands A [M,K] (lda) and B [N,K] (ldb), fp32 read as TF32 or bf16 in
// memory (bf16): the caller checked that A and B are 16-byte aligned and lda, ldb multiples of 4
// (fp32) or 8 (bf16); M, N, K >= 1, alpha != 0. Throws crema::Error off compute capability 9.0.
void gemm_wgmma_pipelined_k_major(bool bf16, int M, int N, int K, float alpha, const void* A,
                                  int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                                  int64_t ldc, gpu::Stream stream);
// The element types t4's kernel reads (f32 read as TF32, bf16, f16) and the C it writes (f32,
// bf16, f16): cuda::gemm_16bit's combinations (gemm_16bit_cuda.cu).
enum class Elem { f32, bf16, f16 };

// t4's kernel on K-major operands A [M,K] (lda) and B [N,K] (ldb) of type `in` (f32 read as
// TF32, bf16 or f16; the caller checked alignment as for gemm_wgmma_pipelined_k_major), C of type
// `out` (f32, or the operands' 16-bit type):
//   C = alpha * A B^T + bias[n] (bias may be null) + beta * C.
// With split.splits > 1, block row y sums slabs [y * slabs_per_split, ...) of k (out must be f32,
// alpha 1, beta 0, no bias) into C + y * split.stride. Throws crema::Error off compute capability
// 9.0.
struct SlabSplit {
  int splits = 1;
  int slabs_per_split = 0;  // 0: all of K
  int64_t stride = 0;       // elements of C between two splits' outputs
};
void gemm_wgmma_k_major(Elem in, Elem out, int M, int N, int K, float alpha, const void* A,
                        int64_t lda, const void* B, int64_t ldb, float beta, void* C, int64_t ldc,
                        const float* bias, const SlabSplit& split, gpu::Stream stream);
// The same kernel with either 16-bit operand MN-major, read in place through wgmma's transpose
// bits (gemm_16bit's wgmma_in_place): a_mn_major: A stored [K,M] (lda >= M), else [M,K];
// b_mn_major: B stored [K,N] (ldb >= N), else [N,K]. The caller checked that both are 16-byte
// aligned with lda, ldb multiples of 8 (any M, N, K: the copy engine zero-fills past the edges).
// f32 operands (TF32) must be K-major. persistent (without a split): a grid of at most one block
// per SM, each walking several tiles, the next tile's slabs loaded during this tile's store.
void gemm_wgmma_any_major(Elem in, Elem out, bool a_mn_major, bool b_mn_major, int M, int N, int K,
                          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb,
                          float beta, void* C, int64_t ldc, const float* bias,
                          const SlabSplit& split, gpu::Stream stream, bool persistent);
// The split of K for that kernel on an M x N x K product with slabs of `slab_k` (64: 16-bit, 32:
// TF32) on the current device (gemm_16bit_cuda.cu): none while C's 128 x 256 tiles fill at least
// half the SMs (one 197 KB block per SM) or K is short; else about one block per SM, each split a
// whole number of at least 8 slabs. A function of the shape and the SM count alone.
SlabSplit wgmma_split(int64_t M, int64_t N, int64_t K, int slab_k);
// C = alpha * (part[0] + ... + part[splits-1]) + bias[n] + beta * C, the parts dense M x N fp32
// added in order (splits 0: C = bias + beta C), beta == 0 leaving C unread; C of type `out`.
void sum_parts(Elem out, int M, int N, int splits, const float* parts, float alpha,
               const float* bias, float beta, void* C, int64_t ldc, gpu::Stream stream);
// k per slab of that kernel for 16-bit operands (one 128-byte row: 64 elements), and its tile.
constexpr int kWgmma16SlabK = 64, kWgmmaTileM = 128, kWgmmaTileN = 256;

// t5's repacking plan (gemm_wgmma_repacked_sm90a.cu): which operands t4 cannot read in place and
// the workspace their K-major copies take, A's copy first, then B's, each [rows, kp] of
// `element_bytes` (4: fp32, 2: bf16 or f16); kp = K rounded up to 16 bytes.
struct RepackPlan {
  int64_t kp = 0;
  bool copy_a = false, copy_b = false;
  size_t a_floats = 0, b_floats = 0;
  size_t floats() const { return a_floats + b_floats; }
};
RepackPlan make_repack_plan(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            int element_bytes, bool copy_all);
// dst [R, Kp] = the K-major copy of a 16-bit operand (bits moved unchanged, zeros for k >= K):
// src[k * lds + r] when `transposed` (MN-major), else src[r * lds + k].
void repack_16bit(bool transposed, int R, int K, int Kp, const uint16_t* src, int64_t lds,
                  uint16_t* dst, gpu::Stream stream);

// t5: the operands repacked into `workspace` where needed, then t4's kernel
// (gemm_wgmma_repacked_sm90a.cu); `bf16` picks the math. Without the workspace it needs
// (nullptr) it runs t4 (TF32) or t3 (bf16).
void gemm_wgmma_repacked(const GemmArgs& args, bool bf16, float* workspace, gpu::Stream stream);
// cuda::gemm_bf16 past its size and leading-dimension checks (M, N, K >= 1, alpha != 0): copies
// the operands t4 cannot read in place into `workspace`, throws crema::Error naming an operand
// that it would read in place but is misaligned, or a missing workspace.
void gemm_bf16_repacked(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                        float* C, int64_t ldc, float* workspace, gpu::Stream stream);

// Whether the current device has compute capability 9.0 (H100, H200): wgmma's requirement.
bool device_is_sm90();

}  // namespace crema::kernels::cuda::detail
