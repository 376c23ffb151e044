// bf16 and f16 in CUDA kernels (included by .cu files only): crema's storage types (core/float16.h)
// read as float and written back, and moved 16 bytes at a time.
//
//   to_float(v)         float, bf16_t or f16_t -> float, exactly (bf16: a shift; f16: cvt, NaN
//                       payloads kept)
//   from_float<T>(f)    float -> T, rounded to nearest even (one cvt.rn); a NaN becomes the quiet
//                       NaN of its sign, as on the host, so GPU and CPU casts agree bit for bit
//   as_cuda(v)          bf16_t -> __nv_bfloat16, f16_t -> __half: the same 16 bits, no conversion
//   load_floats<N>(p, i, out), store_floats<N>(p, i, in)
//                       N consecutive elements from element i, widened to float / narrowed from
//                       float: through 16-byte accesses when N * sizeof(T) is a multiple of 16
//                       (the caller checks that p + i is 16-byte aligned; 4 floats or 8 halves
//                       each), one element at a time otherwise (N = 1: a scalar tail)
//
// The memory-bound ops keep their arithmetic in float and only their loads and stores in T: one
// rounding per output, where a bf16 result is within 2^-8 and an f16 within 2^-11 of the float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/float16.h"

namespace crema::kernels::cuda {

__device__ inline float to_float(float v) {
  return v;
}
__device__ inline float to_float(bf16_t v) {
  return __uint_as_float(uint32_t(v.bits) << 16);
}
// cvt.f32.f16 turns every NaN into the canonical one; the payload is kept as the CPU's widening
// (core/float16.h) keeps it, so both give the same bits.
__device__ inline float to_float(f16_t v) {
  if ((v.bits & 0x7c00u) == 0x7c00u && (v.bits & 0x3ffu) != 0) {
    return __uint_as_float((uint32_t(v.bits & 0x8000u) << 16) | 0x7f800000u |
                           (uint32_t(v.bits & 0x3ffu) << 13));
  }
  return __half2float(__ushort_as_half(v.bits));
}

__device__ inline __nv_bfloat16 as_cuda(bf16_t v) {
  return __ushort_as_bfloat16(v.bits);
}
__device__ inline __half as_cuda(f16_t v) {
  return __ushort_as_half(v.bits);
}

template <class T>
__device__ T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline bf16_t from_float<bf16_t>(float v) {
  if (isnan(v)) return bf16_t{uint16_t(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7fc0u)};
  return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}
template <>
__device__ inline f16_t from_float<f16_t>(float v) {
  if (isnan(v)) return f16_t{uint16_t(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7e00u)};
  return f16_t{__half_as_ushort(__float2half_rn(v))};
}

// Elements of T in one 16-byte access.
template <class T>
constexpr int kPerVector = int(16 / sizeof(T));

template <int N, class T>
__device__ inline void load_floats(const T* p, int64_t i, float (&out)[N]) {
  if constexpr (N % kPerVector<T> != 0) {
#pragma unroll
    for (int e = 0; e < N; ++e) out[e] = to_float(p[i + e]);
  } else {
    const uint4* v = reinterpret_cast<const uint4*>(p + i);
#pragma unroll
    for (int k = 0; k < N / kPerVector<T>; ++k) {
      const uint4 raw = v[k];
      T elements[kPerVector<T>];
      memcpy(elements, &raw, 16);
#pragma unroll
      for (int e = 0; e < kPerVector<T>; ++e) out[k * kPerVector<T> + e] = to_float(elements[e]);
    }
  }
}

template <int N, class T>
__device__ inline void store_floats(T* p, int64_t i, const float (&in)[N]) {
  if constexpr (N % kPerVector<T> != 0) {
#pragma unroll
    for (int e = 0; e < N; ++e) p[i + e] = from_float<T>(in[e]);
  } else {
    uint4* v = reinterpret_cast<uint4*>(p + i);
#pragma unroll
    for (int k = 0; k < N / kPerVector<T>; ++k) {
      T elements[kPerVector<T>];
#pragma unroll
      for (int e = 0; e < kPerVector<T>; ++e) {
        elements[e] = from_float<T>(in[k * kPerVector<T> + e]);
      }
      uint4 raw;
      memcpy(&raw, elements, 16);
      v[k] = raw;
    }
  }
}

}  // namespace crema::kernels::cuda
