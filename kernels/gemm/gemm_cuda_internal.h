// Launchers of the CUDA GEMM versions that live in their own files (v5-v11), called by
// cuda::sgemm's switch in gemm_cuda.cu, and small helpers they share. Host-side declarations only:
// no CUDA header needed. Arguments are those of cuda::sgemm, already checked there (sizes below
// 2^31, leading dimensions large enough, M, N, K >= 1 and alpha != 0).
#pragma once

#include <cstdint>

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

// v5: fp32 SIMT, warp-shaped thread groups, double-buffered shared memory fed from registers
//     (gemm_warp_tiles_cuda.cu).
void sgemm_warp_tiles(const GemmArgs& args, gpu::Stream stream);
// v11's 128 x 128 tile (gemm_ffma_tuned_cuda.cu): fp32 SIMT with double-buffered shared slabs and
// register fragments, for any shape (cuda::sgemm runs it where v4 would pick its 128 x 128 tile).
void sgemm_ffma_tuned(const GemmArgs& args, gpu::Stream stream);
// v6 / v7: mma.sync tensor cores, TF32 (bf16 == false) or bf16 operands (gemm_mma_cuda.cu).
void gemm_mma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// v8: wgmma on sm_90a (gemm_wgmma_cuda.cu); throws crema::Error on any other device.
void gemm_wgmma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// v9: wgmma fed by TMA through an mbarrier ring, TF32 (gemm_wgmma_pipelined_sm90a.cu). NT calls
// with 16-byte aligned operands and lda, ldb, K multiples of 4 run it; any other call runs v8.
void gemm_wgmma_pipelined(const GemmArgs& args, gpu::Stream stream);
// v9's kernel on K-major operands A [M,K] (lda) and B [N,K] (ldb), fp32 read as TF32 or bf16 in
// memory (bf16): the caller checked that A and B are 16-byte aligned and lda, ldb multiples of 4
// (fp32) or 8 (bf16); M, N, K >= 1, alpha != 0. Throws crema::Error off compute capability 9.0.
void gemm_wgmma_pipelined_k_major(bool bf16, int M, int N, int K, float alpha, const void* A,
                                  int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                                  int64_t ldc, gpu::Stream stream);
// v10: the operands repacked into `workspace` where needed, then v9's kernel
// (gemm_wgmma_repacked_sm90a.cu); `bf16` picks the math. Without the workspace it needs
// (nullptr) it runs v9 (TF32) or v8 (bf16).
void gemm_wgmma_repacked(const GemmArgs& args, bool bf16, float* workspace, gpu::Stream stream);
// cuda::gemm_bf16 past its size and leading-dimension checks (M, N, K >= 1, alpha != 0): copies
// the operands v9 cannot read in place into `workspace`, throws crema::Error naming an operand
// that it would read in place but is misaligned, or a missing workspace.
void gemm_bf16_repacked(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                        float* C, int64_t ldc, float* workspace, gpu::Stream stream);

// Whether the current device has compute capability 9.0 (H100, H200): wgmma's requirement.
bool device_is_sm90();

}  // namespace crema::kernels::cuda::detail
