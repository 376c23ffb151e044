// Device helpers shared by the CUDA GEMM rungs s9-s16 and t1-t3: the order in which blocks walk
// the tiles of C, operand rounding for the tensor cores, cp.async, and the alpha/beta store.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace crema::kernels::cuda::detail {

// Block b of a grid over tiles_m x tiles_n tiles of C, in groups of `group` tile rows, row index
// fastest: the blocks running at once cover a squarer patch of C than row-major order would, so
// the operand tiles they share come from L2 instead of DRAM.
struct TileCoord {
  int m, n;
};
__device__ __forceinline__ TileCoord grouped_tile(int b, int tiles_m, int tiles_n, int group) {
  const int per_group = group * tiles_n;
  const int first_m = b / per_group * group;
  const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
  const int in_group = b % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

// fp32 -> TF32 (round to nearest, ties away: cvt.rna), kept in a 32-bit register.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// Two fp32 -> a bf16 pair (round to nearest even); `lo` lands in the low half (the lower index).
__device__ __forceinline__ uint32_t to_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The mma.sync instructions (fp32 accumulation): d += a * b on one 16 x 8 tile, TF32 m16n8k8 or
// bf16 m16n8k16 (fragment layouts: gemm_mma_cuda.cu, convolution_mma.cuh).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// cp.async of `bytes` (16 or 4) from global to shared; only `src_bytes` are read, the rest of
// the destination is zero-filled (src_bytes == 0: nothing is read, `src` need only be mapped).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, int src_bytes) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                 "r"(src_bytes));
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// C[m][n], C[m][n+1] = alpha * v + beta * C (beta == 0: C is not read, it may hold NaN), for the
// columns below N; (m, n) with m < M assumed checked by the caller.
__device__ __forceinline__ void store_pair(float* C, int64_t ldc, int m, int n, int N, float alpha,
                                           float beta, float v0, float v1) {
  float* c = C + m * ldc + n;
  if (n < N) c[0] = beta == 0.0f ? alpha * v0 : alpha * v0 + beta * c[0];
  if (n + 1 < N) c[1] = beta == 0.0f ? alpha * v1 : alpha * v1 + beta * c[1];
}

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KB).
template <class Kernel>
void set_shared_memory_limit(Kernel kernel, int bytes, const char* what) {
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) {
    throw DeviceError(std::string(what) + ": cannot use " + std::to_string(bytes) +
                      " bytes of shared memory per block: " + cudaGetErrorString(e));
  }
}

}  // namespace crema::kernels::cuda::detail
