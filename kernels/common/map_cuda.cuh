// Elementwise maps for crema's CUDA kernels (included by .cu files only):
//   out[i] = f(a[i], b[i])   (or f(a[i]), or f(), by the number of inputs)
// in two versions:
//   scalar:      one element per thread and iteration of a grid-stride loop;
//   vectorized:  the same with float4 loads and stores (one 16-byte access per array per four
//                elements) when every pointer is 16-byte aligned, the last n % 4 elements done by
//                the first threads of block 0 in the same launch; falls back to scalar otherwise.
// The output may alias an input: each element is read and written by one thread, once, so the
// pointers carry no __restrict__ (which would promise the compiler they do not overlap).
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"

namespace crema::kernels::cuda::detail {

constexpr int kMapThreads = 256;
// Enough blocks to fill an H100 several times over; beyond that, threads loop.
constexpr int64_t kMaxMapBlocks = 4096;

inline int map_blocks(int64_t work) {
  const int64_t blocks = (work + kMapThreads - 1) / kMapThreads;
  return int(blocks < 1 ? 1 : (blocks > kMaxMapBlocks ? kMaxMapBlocks : blocks));
}

// Whether a grid-stride loop over n elements may use int32 indices (cheaper division): the index
// passes n by up to one grid's stride (at most kMaxMapBlocks * kMapThreads = 2^20) before the
// loop ends, and that must not overflow either.
inline bool int32_indexable(int64_t n) {
  return n <= (int64_t(1) << 30);
}

inline bool aligned16(const void* p) {
  return p == nullptr || (uintptr_t(p) & 15u) == 0;
}

template <int kInputs, class F>
__device__ inline float apply(const F& f, const float* a, const float* b, int64_t i) {
  if constexpr (kInputs == 0) {
    return f();
  } else if constexpr (kInputs == 1) {
    return f(a[i]);
  } else {
    return f(a[i], b[i]);
  }
}

template <int kInputs, class F>
__global__ void map_scalar(int64_t n, const float* a, const float* b, float* out, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = apply<kInputs>(f, a, b, i);
  }
}

template <int kInputs, class F>
__global__ void map_vectorized(int64_t n, const float* a, const float* b, float* out, F f) {
  const int64_t n4 = n / 4;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n4;
       j += int64_t(gridDim.x) * blockDim.x) {
    float4 va = zero, vb = zero, r;
    if constexpr (kInputs >= 1) va = reinterpret_cast<const float4*>(a)[j];
    if constexpr (kInputs >= 2) vb = reinterpret_cast<const float4*>(b)[j];
    if constexpr (kInputs == 0) {
      r = make_float4(f(), f(), f(), f());
    } else if constexpr (kInputs == 1) {
      r = make_float4(f(va.x), f(va.y), f(va.z), f(va.w));
    } else {
      r = make_float4(f(va.x, vb.x), f(va.y, vb.y), f(va.z, vb.z), f(va.w, vb.w));
    }
    reinterpret_cast<float4*>(out)[j] = r;
  }
  const int64_t tail = n - 4 * n4;  // 0 to 3 elements
  if (blockIdx.x == 0 && int64_t(threadIdx.x) < tail) {
    const int64_t i = 4 * n4 + threadIdx.x;
    out[i] = apply<kInputs>(f, a, b, i);
  }
}

// Launches out = f(a, b) over n elements on `stream`; a and b may be null when f takes fewer
// inputs. `what` names the kernel in a launch failure.
template <int kInputs, class F>
void launch_map(int64_t n, const float* a, const float* b, float* out, F f, bool vectorized,
                gpu::Stream stream, const char* what) {
  if (n <= 0) return;
  if (vectorized && aligned16(a) && aligned16(b) && aligned16(out)) {
    map_vectorized<kInputs><<<map_blocks(n / 4), kMapThreads, 0, stream>>>(n, a, b, out, f);
  } else {
    map_scalar<kInputs><<<map_blocks(n), kMapThreads, 0, stream>>>(n, a, b, out, f);
  }
  gpu::check_launch(what);
}

}  // namespace crema::kernels::cuda::detail
