// Dropout, CUDA versions. Every thread reads the step from device memory and derives the step's
// key itself (two hashes, once per thread), then one hash per element (dropout_hash.h: integer
// arithmetic, the same bits as the CPU).
//   DropoutVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   DropoutVersion::vectorized  four elements per thread through float4 loads and stores when
//       both pointers are 16-byte aligned, the n % 4 tail by the first threads of block 0.
// dropout_advance is a one-thread kernel: the forward's mask kernel cannot advance the counter
// itself, since its other blocks may read the counter after any given thread has written it.
#include <algorithm>

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

__global__ void mask_scalar(int64_t n, const float* in, float* out, Mask m) {
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    out[i] = m(key, i, in[i]);
  }
}

__global__ void mask_vectorized(int64_t n, const float* in, float* out, Mask m) {
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  const int64_t n4 = n / 4;
  for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < n4;
       j += int64_t(gridDim.x) * kThreads) {
    const float4 v = reinterpret_cast<const float4*>(in)[j];
    const int64_t i = 4 * j;
    reinterpret_cast<float4*>(out)[j] =
        make_float4(m(key, i, v.x), m(key, i + 1, v.y), m(key, i + 2, v.z), m(key, i + 3, v.w));
  }
  const int64_t tail = n - 4 * n4;  // 0 to 3 elements
  if (blockIdx.x == 0 && int64_t(threadIdx.x) < tail) {
    const int64_t i = 4 * n4 + threadIdx.x;
    out[i] = m(key, i, in[i]);
  }
}

void apply_mask(int64_t n, const float* in, float* out, float ratio, uint64_t seed,
                const uint64_t* step, DropoutVersion version, gpu::Stream stream,
                const char* what) {
  if (n <= 0) return;
  const Mask m{dropout_hash::threshold(ratio), dropout_scale(ratio), seed, step};
  if (version == DropoutVersion::vectorized && aligned16(in) && aligned16(out)) {
    mask_vectorized<<<blocks_for(n / 4, kThreads, kMaxBlocks), kThreads, 0, stream>>>(n, in, out,
                                                                                      m);
  } else {
    mask_scalar<<<blocks_for(n, kThreads, kMaxBlocks), kThreads, 0, stream>>>(n, in, out, m);
  }
  gpu::check_launch(what);
}

// Stochastic depth: blockIdx.y walks the rows, the x dimension the row (four floats per thread
// when kVec). The row's keep is one hash per thread; a dropped row is written, not read.
template <bool kVec>
__global__ void stochastic_depth_kernel(int64_t rows, int64_t row_size, const float* in, float* out,
                                        Mask m) {
  const uint64_t key = dropout_hash::key(m.seed, *m.step);
  const int64_t width = kVec ? row_size / 4 : row_size;
  for (int64_t n = blockIdx.y; n < rows; n += gridDim.y) {
    const bool keep = dropout_hash::keep(key, uint64_t(n), m.threshold);
    for (int64_t j = blockIdx.x * int64_t(kThreads) + threadIdx.x; j < width;
         j += int64_t(gridDim.x) * kThreads) {
      if constexpr (kVec) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (keep) {
          v = reinterpret_cast<const float4*>(in + n * row_size)[j];
          v = make_float4(v.x * m.scale, v.y * m.scale, v.z * m.scale, v.w * m.scale);
        }
        reinterpret_cast<float4*>(out + n * row_size)[j] = v;
      } else {
        out[n * row_size + j] = keep ? in[n * row_size + j] * m.scale : 0.0f;
      }
    }
  }
}

}  // namespace

void stochastic_depth(int64_t rows, int64_t row_size, const float* in, float* out, float ratio,
                      uint64_t seed, const uint64_t* step, gpu::Stream stream) {
  if (rows <= 0 || row_size <= 0) return;
  const Mask m{dropout_hash::threshold(ratio), dropout_scale(ratio), seed, step};
  const bool vec = row_size % 4 == 0 && aligned16(in) && aligned16(out);
  const int64_t width = vec ? row_size / 4 : row_size;
  // About kMaxBlocks blocks in all: along the row first, the rest over the rows.
  const int bx = blocks_for(width, kThreads, kMaxBlocks);
  const dim3 grid(unsigned(bx),
                  unsigned(std::min<int64_t>(rows, std::max<int64_t>(1, kMaxBlocks / bx))));
  if (vec) {
    stochastic_depth_kernel<true><<<grid, kThreads, 0, stream>>>(rows, row_size, in, out, m);
  } else {
    stochastic_depth_kernel<false><<<grid, kThreads, 0, stream>>>(rows, row_size, in, out, m);
  }
  gpu::check_launch("stochastic_depth");
}

void dropout_advance(uint64_t* step, gpu::Stream stream) {
  advance<<<1, 1, 0, stream>>>(step);
  gpu::check_launch("dropout_advance");
}

void dropout_forward(int64_t n, const float* x, float* y, float ratio, uint64_t seed,
                     const uint64_t* step, DropoutVersion version, gpu::Stream stream) {
  apply_mask(n, x, y, ratio, seed, step, version, stream, "dropout_forward");
}

void dropout_backward(int64_t n, const float* dy, float* dx, float ratio, uint64_t seed,
                      const uint64_t* step, DropoutVersion version, gpu::Stream stream) {
  apply_mask(n, dy, dx, ratio, seed, step, version, stream, "dropout_backward");
}

}  // namespace crema::kernels::cuda
