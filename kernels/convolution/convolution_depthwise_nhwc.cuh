// What the depthwise NHWC kernels share (convolution_depthwise_nhwc_cuda.cu: forward and
// backward data; convolution_depthwise_nhwc_filter_cuda.cu: the filter gradient): the element
// types, 16-byte vector loads and stores of channels, the block's shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"

namespace crema::kernels::cuda::depthwise_nhwc {

constexpr int kBlockThreads = 256;

// The element types: storage, channels in 16 bytes, widening to fp32 and rounding (to nearest
// even) back.
struct F32 {
  using T = float;
  static constexpr int kVec = 4;
  static __device__ __forceinline__ float widen(T v) { return v; }
  static __device__ __forceinline__ T narrow(float v) { return v; }
};
struct Bf16 {
  using T = uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float widen(T v) { return __uint_as_float(uint32_t(v) << 16); }
  static __device__ __forceinline__ T narrow(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
struct F16 {
  using T = uint16_t;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float widen(T v) { return __half2float(__ushort_as_half(v)); }
  static __device__ __forceinline__ T narrow(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

// V channels from p, widened: one element (V == 1) or one 16-byte load (p 16-byte aligned).
// NC: through the read-only cache (tensors no thread of the kernel writes).
template <class E, int V, bool NC = true>
__device__ __forceinline__ void load_channels(const typename E::T* p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = E::widen(NC ? __ldg(p) : *p);
  } else {
    static_assert(V * sizeof(typename E::T) == 16, "a vector is 16 bytes");
    const uint4 raw =
        NC ? __ldg(reinterpret_cast<const uint4*>(p)) : *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (V == 4) {
        v[i] = __uint_as_float(words[i]);
      } else {
        v[2 * i] = E::widen(uint16_t(words[i] & 0xffffu));
        v[2 * i + 1] = E::widen(uint16_t(words[i] >> 16));
      }
    }
  }
}

// Rounds v to the type, stores it at p (as load_channels reads) and leaves in v what was stored.
template <class E, int V>
__device__ __forceinline__ void store_channels(typename E::T* p, float (&v)[V]) {
  if constexpr (V == 1) {
    const typename E::T t = E::narrow(v[0]);
    *p = t;
    v[0] = E::widen(t);
  } else {
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (V == 4) {
        words[i] = __float_as_uint(v[i]);
      } else {
        const uint16_t lo = E::narrow(v[2 * i]), hi = E::narrow(v[2 * i + 1]);
        words[i] = uint32_t(lo) | uint32_t(hi) << 16;
        v[2 * i] = E::widen(lo), v[2 * i + 1] = E::widen(hi);
      }
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// V floats of shared memory (16-byte aligned when V > 1).
template <int V>
__device__ __forceinline__ void read_shared(const float* p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = *p;
  } else {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      const float4 f = *reinterpret_cast<const float4*>(p + i);
      v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
    }
  }
}

// A block of kBlockThreads: tx threads across a slab of tx vectors of channels (the fastest
// index of the thread id) times ty across output positions. The slabs split the vectors evenly
// (144 bf16 channels = 18 vectors: 3 slabs of 6, not 8 + 8 + 2), at most max_tx a slab.
struct BlockShape {
  int tx, ty, slabs;
};
inline BlockShape block_shape(int vectors, int max_tx) {
  const int slabs = (vectors + max_tx - 1) / max_tx;
  const int tx = (vectors + slabs - 1) / slabs;
  return {tx, kBlockThreads / tx, (vectors + tx - 1) / tx};
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
