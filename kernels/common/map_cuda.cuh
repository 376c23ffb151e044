// Elementwise maps for crema's CUDA kernels (included by .cu files only):
//   out[i] = f(a[i], b[i])   (or f(a[i]), or f(), by the number of inputs)
// over arrays of one storage type T (float, bf16_t or f16_t): f computes in float, the elements
// are widened on load and rounded once on store (float16_cuda.cuh). Two versions:
//   scalar:      one element per thread and iteration of a grid-stride loop;
//   vectorized:  the same with 16-byte loads and stores (4 floats or 8 halves per access) when
//                every pointer is 16-byte aligned, the last n % 4 (n % 8) elements done by the
//                first threads of block 0 in the same launch; falls back to scalar otherwise.
// The output may alias an input: each element is read and written by one thread, once, so the
// pointers carry no __restrict__ (which would promise the compiler they do not overlap).
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/common/float16_cuda.cuh"

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

// T, in a parameter that does not take part in deducing T (launch_map's inputs may be nullptr).
template <class T>
struct Same {
  using type = T;
};

template <int kInputs, class F>
__device__ inline float call(const F& f, float a, float b) {
  if constexpr (kInputs == 0) {
    return f();
  } else if constexpr (kInputs == 1) {
    return f(a);
  } else {
    return f(a, b);
  }
}

template <int kInputs, class T, class F>
__device__ inline void apply(const F& f, const T* a, const T* b, T* out, int64_t i) {
  const float va = kInputs >= 1 ? to_float(a[i]) : 0.0f;
  const float vb = kInputs >= 2 ? to_float(b[i]) : 0.0f;
  out[i] = from_float<T>(call<kInputs>(f, va, vb));
}

template <int kInputs, class T, class F>
__global__ void map_scalar(int64_t n, const T* a, const T* b, T* out, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    apply<kInputs>(f, a, b, out, i);
  }
}

template <int kInputs, class T, class F>
__global__ void map_vectorized(int64_t n, const T* a, const T* b, T* out, F f) {
  constexpr int V = kPerVector<T>;
  const int64_t nv = n / V;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < nv;
       j += int64_t(gridDim.x) * blockDim.x) {
    float va[V] = {}, vb[V] = {}, r[V];
    if constexpr (kInputs >= 1) load_floats(a, j * V, va);
    if constexpr (kInputs >= 2) load_floats(b, j * V, vb);
#pragma unroll
    for (int k = 0; k < V; ++k) r[k] = call<kInputs>(f, va[k], vb[k]);
    store_floats(out, j * V, r);
  }
  const int64_t tail = n - V * nv;  // 0 to V - 1 elements
  if (blockIdx.x == 0 && int64_t(threadIdx.x) < tail) {
    apply<kInputs>(f, a, b, out, V * nv + threadIdx.x);
  }
}

// Launches out = f(a, b) over n elements on `stream`; a and b may be null when f takes fewer
// inputs. `what` names the kernel in a launch failure.
template <int kInputs, class T, class F>
void launch_map(int64_t n, const typename Same<T>::type* a, const typename Same<T>::type* b, T* out,
                F f, bool vectorized, gpu::Stream stream, const char* what) {
  if (n <= 0) return;
  if (vectorized && aligned16(a) && aligned16(b) && aligned16(out)) {
    map_vectorized<kInputs>
        <<<map_blocks(n / kPerVector<T>), kMapThreads, 0, stream>>>(n, a, b, out, f);
  } else {
    map_scalar<kInputs><<<map_blocks(n), kMapThreads, 0, stream>>>(n, a, b, out, f);
  }
  gpu::check_launch(what);
}

}  // namespace crema::kernels::cuda::detail
