// Launchers of the CUDA GEMM versions that live in their own files (v5-v9), called by
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
// v6 / v7: mma.sync tensor cores, TF32 (bf16 == false) or bf16 operands (gemm_mma_cuda.cu).
void gemm_mma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// v8: wgmma on sm_90a (gemm_wgmma_cuda.cu); throws crema::Error on any other device.
void gemm_wgmma(const GemmArgs& args, bool bf16, gpu::Stream stream);
// v9: wgmma fed by TMA through an mbarrier ring, TF32 (gemm_wgmma_pipelined_sm90a.cu). NT calls
// with 16-byte aligned operands and lda, ldb, K multiples of 4 run it; any other call runs v8.
void gemm_wgmma_pipelined(const GemmArgs& args, gpu::Stream stream);
// v9's kernel on bf16 operands in memory, A [M,K] and B [N,K] (cuda::gemm_bf16, which checked the
// layout and alignment; M, N, K >= 1, alpha != 0); throws crema::Error off compute capability 9.0.
void gemm_wgmma_pipelined_bf16(int M, int N, int K, float alpha, const uint16_t* A, int64_t lda,
                               const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc,
                               gpu::Stream stream);

// Whether the current device has compute capability 9.0 (H100, H200): wgmma's requirement.
bool device_is_sm90();

}  // namespace crema::kernels::cuda::detail
