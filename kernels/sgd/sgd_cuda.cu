// SGD with momentum, CUDA versions. One update reads w, g, v and writes w, v: 20 bytes per
// element, nothing to compute, so a kernel costs its memory traffic plus its launch. LeNet's
// parameters are 8 tensors of 10 to 400,000 elements: the launches, not the bytes, dominate.
//   sgd_momentum_update: one element per thread and iteration of a grid-stride loop.
//   SgdVersion::per_tensor  (multi) one such launch per parameter.
//   SgdVersion::one_launch  (multi) up to kMaxSlicesPerLaunch parameters per launch: the slices
//                        travel by value in the kernel's parameters (__grid_constant__, so they
//                        are read in place, not copied per thread) and each slice owns a range
//                        of blocks; a block finds its slice by a scan of at most 16 entries.
#include "kernels/sgd/sgd.h"

#include <algorithm>

namespace crema::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// Elements per thread a slice gets before it gets another block, and the most blocks per slice.
constexpr int64_t kPerThread = 4;
constexpr int64_t kMaxBlocksPerSlice = 8192;

__device__ inline void update(int64_t i, float* __restrict__ w, const float* __restrict__ g,
                              float* __restrict__ v, float lr, float momentum, float weight_decay) {
  const float history = momentum * v[i] + lr * (g[i] + weight_decay * w[i]);
  v[i] = history;
  w[i] -= history;
}

// consumed: g as writable when the update zeroes it (the multi-tensor API), else null.
__global__ void sgd_kernel(int64_t n, float* __restrict__ w, const float* __restrict__ g,
                           float* __restrict__ v, float lr, float momentum, float weight_decay,
                           float* __restrict__ consumed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    update(i, w, g, v, lr, momentum, weight_decay);
    if (consumed != nullptr) consumed[i] = 0.0f;
  }
}

int blocks_for(int64_t n) {
  const int64_t per_block = kThreads * kPerThread;
  return int(std::min(kMaxBlocksPerSlice, (n + per_block - 1) / per_block));
}

// Up to kMaxSlicesPerLaunch slices; slice k owns blocks [first_block[k], first_block[k + 1]).
struct SliceBatch {
  SgdSlice slices[kMaxSlicesPerLaunch];
  int first_block[kMaxSlicesPerLaunch + 1];
  int count;
};

__global__ void sgd_multi_kernel(const __grid_constant__ SliceBatch batch, float momentum) {
  int k = 0;
  while (k + 1 < batch.count && int(blockIdx.x) >= batch.first_block[k + 1]) ++k;
  const SgdSlice& s = batch.slices[k];
  const int64_t blocks = batch.first_block[k + 1] - batch.first_block[k];
  for (int64_t i = (int64_t(blockIdx.x) - batch.first_block[k]) * kThreads + threadIdx.x; i < s.n;
       i += blocks * kThreads) {
    update(i, s.w, s.g, s.v, s.lr, momentum, s.weight_decay);
    s.g[i] = 0.0f;
  }
}

}  // namespace

void sgd_momentum_update(int64_t n, float* w, const float* g, float* v, float lr, float momentum,
                         float weight_decay, gpu::Stream stream) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, w, g, v, lr, momentum, weight_decay,
                                                      nullptr);
  gpu::check_launch("sgd_momentum_update");
}

void sgd_momentum_update_multi(const SgdSlice* slices, int count, float momentum, SgdVersion version,
                               gpu::Stream stream) {
  if (version == SgdVersion::per_tensor) {
    for (int k = 0; k < count; ++k) {
      const SgdSlice& s = slices[k];
      if (s.n <= 0) continue;
      sgd_kernel<<<blocks_for(s.n), kThreads, 0, stream>>>(s.n, s.w, s.g, s.v, s.lr, momentum,
                                                            s.weight_decay, s.g);
      gpu::check_launch("sgd_momentum_update_multi (per tensor)");
    }
    return;
  }
  SliceBatch batch{};
  auto launch = [&] {
    if (batch.count == 0) return;
    sgd_multi_kernel<<<batch.first_block[batch.count], kThreads, 0, stream>>>(batch, momentum);
    gpu::check_launch("sgd_momentum_update_multi");
    batch = SliceBatch{};
  };
  for (int k = 0; k < count; ++k) {
    if (slices[k].n <= 0) continue;
    batch.slices[batch.count] = slices[k];
    batch.first_block[batch.count + 1] = batch.first_block[batch.count] + blocks_for(slices[k].n);
    if (++batch.count == kMaxSlicesPerLaunch) launch();
  }
  launch();
}

}  // namespace crema::kernels::cuda
