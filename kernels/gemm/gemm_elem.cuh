// A 16-bit element (bf16 or f16 bits, `Elem`) to fp32 and back, for the GEMM kernels that read or
// write 16-bit operands or C: exact widening; narrowing rounds to nearest even.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda::detail {

template <Elem T>
__device__ __forceinline__ float widen(uint16_t bits) {
  if constexpr (T == Elem::bf16) return __uint_as_float(uint32_t(bits) << 16);
  return __half2float(__ushort_as_half(bits));
}

template <Elem T>
__device__ __forceinline__ uint16_t narrow(float v) {
  if constexpr (T == Elem::bf16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  return __half_as_ushort(__float2half_rn(v));
}

}  // namespace crema::kernels::cuda::detail
