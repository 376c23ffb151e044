// Dropout, CUDA versions. Every thread reads the step from device memory and derives the step's
// key itself (two hashes, once per thread), then one hash per element (dropout_hash.h: integer
// arithmetic, the same bits as the CPU).
//   DropoutVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   DropoutVersion::vectorized  16 bytes per thread through vector loads and stores (4 floats,
//       8 bf16 or f16) when both pointers are 16-byte aligned, the tail by the first threads of
//       block 0.
// Both are templates on the storage type (float, bf16_t, f16_t): the kept value is scaled in
// float and rounded once.
// dropout_advance is a one-thread kernel: the forward's mask kernel cannot advance the counter
// itself, since its other blocks may read the counter after any given thread has written it.
#include <algorithm>

#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/launch.h"
#include "kernels/dropout/dropout.h"
#include "kernels/dropout/dropout_hash.h"

namespace crema::kernels::cuda {
namespace {

constexpr int64_t kMaxBlocks = 4096;

bool aligned16(const void* p) {
  return (uintptr_t(p) & 15u) == 0;
}

struct Mask {
  uint32_t threshold;
  float scale;
  uint64_t seed;
  const uint64_t* step;

  __device__ float operator()(uint64_t key, int64_t i, float v) const {
    return dropout_hash::keep(key, uint64_t(i), threshold) ? v * scale : 0.0f;
  }
};

__global__ void advance(uint64_t* step) {
  *step += 1;
}

template <class T>
__global__ void mask_scalar(int64_t n, const T* in, T* out, Mask m) {
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    out[i] = from_float<T>(m(key, i, to_float(in[i])));
  }
}

template <class T>
__global__ void mask_vectorized(int64_t n, const T* in, T* out, Mask m) {
  constexpr int V = kPerVector<T>;
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  const int64_t nv = n / V;
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < nv;
       j += int64_t(gridDim.x) * kThreads) {
    float v[V];
    load_floats(in, j * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = m(key, j * V + k, v[k]);
    store_floats(out, j * V, v);
  }
  const int64_t tail = n - V * nv;  // 0 to V - 1 elements
  if (blockIdx.x == 0 && int64_t(threadIdx.x) < tail) {
    const int64_t i = V * nv + threadIdx.x;
    out[i] = from_float<T>(m(key, i, to_float(in[i])));
  }
}

template <class T>
void apply_mask(int64_t n, const T* in, T* out, float ratio, uint64_t seed, const uint64_t* step,
                DropoutVersion version, gpu::Stream stream, const char* what) {
  if (n <= 0) return;
  const Mask m{dropout_hash::threshold(ratio), dropout_scale(ratio), seed, step};
  if (version == DropoutVersion::vectorized && aligned16(in) && aligned16(out)) {
    mask_vectorized<<<blocks_for(n / kPerVector<T>, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        n, in, out, m);
  } else {
    mask_scalar<<<blocks_for(n, kThreads, kMaxBlocks), kThreads, 0, stream>>>(n, in, out, m);
  }
  gpu::check_launch(what);
}

// Stochastic depth: blockIdx.y walks the rows, the x dimension the row (16 bytes per thread when
// kVec: 4 floats or 8 halves). The row's keep is one hash per thread; a dropped row is written,
// not read.
template <class T, bool kVec>
__global__ void stochastic_depth_kernel(int64_t rows, int64_t row_size, const T* in, T* out,
                                        Mask m) {
  constexpr int V = kVec ? kPerVector<T> : 1;
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  const int64_t width = row_size / V;
  for (int64_t n = blockIdx.y; n < rows; n += gridDim.y) {
    const bool keep = dropout_hash::keep(key, uint64_t(n), m.threshold);
    for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < width;
         j += int64_t(gridDim.x) * kThreads) {
      float v[V] = {};
      if (keep) {
        load_floats(in, n * row_size + j * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] *= m.scale;
      }
      store_floats(out, n * row_size + j * V, v);
    }
  }
}

}  // namespace

template <class T>
void stochastic_depth(int64_t rows, int64_t row_size, const T* in, T* out, float ratio,
                      uint64_t seed, const uint64_t* step, gpu::Stream stream) {
  if (rows <= 0 || row_size <= 0) return;
  const Mask m{dropout_hash::threshold(ratio), dropout_scale(ratio), seed, step};
  const bool vec = row_size % kPerVector<T> == 0 && aligned16(in) && aligned16(out);
  const int64_t width = vec ? row_size / kPerVector<T> : row_size;
  // About kMaxBlocks blocks in all: along the row first, the rest over the rows.
  const int bx = blocks_for(width, kThreads, kMaxBlocks);
  const dim3 grid(unsigned(bx),
                  unsigned(std::min<int64_t>(rows, std::max<int64_t>(1, kMaxBlocks / bx))));
  if (vec) {
    stochastic_depth_kernel<T, true><<<grid, kThreads, 0, stream>>>(rows, row_size, in, out, m);
  } else {
    stochastic_depth_kernel<T, false><<<grid, kThreads, 0, stream>>>(rows, row_size, in, out, m);
  }
  gpu::check_launch("stochastic_depth");
}

void dropout_advance(uint64_t* step, gpu::Stream stream) {
  advance<<<1, 1, 0, stream>>>(step);
  gpu::check_launch("dropout_advance");
}

template <class T>
void dropout_forward(int64_t n, const T* x, T* y, float ratio, uint64_t seed, const uint64_t* step,
                     DropoutVersion version, gpu::Stream stream) {
  apply_mask(n, x, y, ratio, seed, step, version, stream, "dropout_forward");
}

template <class T>
void dropout_backward(int64_t n, const T* dy, T* dx, float ratio, uint64_t seed,
                      const uint64_t* step, DropoutVersion version, gpu::Stream stream) {
  apply_mask(n, dy, dx, ratio, seed, step, version, stream, "dropout_backward");
}

#define CREMA_DROPOUT_INSTANTIATE(T)                                                         \
  template void dropout_forward<T>(int64_t, const T*, T*, float, uint64_t, const uint64_t*,  \
                                   DropoutVersion, gpu::Stream);                             \
  template void dropout_backward<T>(int64_t, const T*, T*, float, uint64_t, const uint64_t*, \
                                    DropoutVersion, gpu::Stream);                            \
  template void stochastic_depth<T>(int64_t, int64_t, const T*, T*, float, uint64_t,         \
                                    const uint64_t*, gpu::Stream);
CREMA_DROPOUT_INSTANTIATE(float)
CREMA_DROPOUT_INSTANTIATE(bf16_t)
CREMA_DROPOUT_INSTANTIATE(f16_t)
#undef CREMA_DROPOUT_INSTANTIATE

}  // namespace crema::kernels::cuda
