// 2-D convolution on the GPU: the bias kernels every algorithm shares (the passes themselves are
// the records of algorithm.h, each in its own _cuda.cu file; README.md has the ladder). Every
// kernel is deterministic: each output is summed by one thread (or one block, in a fixed tree), in
// an order fixed by the geometry; no atomics.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda {
namespace {

// y[n, c, i] += bias[c] for y [N, C, HW].
__global__ void add_channel_bias_kernel(const float* __restrict__ bias, int64_t C, int64_t HW,
                                        int64_t total, float* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] += bias[i / HW % C];
  }
}

// db[k] += sum over (n, pq) of dy[n, k, pq]. Block k: thread t sums positions t, t + 256, ...
// in order, then the block adds the 256 sums in a fixed tree.
__global__ void bias_gradient_kernel(const float* __restrict__ dy, int N, int K, int PQ,
                                     float* __restrict__ db) {
  __shared__ float sums[kThreads];
  const int k = blockIdx.x, t = threadIdx.x;
  float sum = 0.0f;
  for (int64_t i = t; i < int64_t(N) * PQ; i += kThreads) {
    sum += dy[(i / PQ * K + k) * PQ + i % PQ];
  }
  sums[t] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) sums[t] += sums[t + stride];
    __syncthreads();
  }
  if (t == 0) db[k] += sums[0];
}

}  // namespace

void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, gpu::Stream stream) {
  channel_bias_gradient(g.N, g.K, g.P() * g.Q(), dy, db, stream);
}

void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      gpu::Stream stream) {
  const int64_t total = N * C * HW;
  if (total == 0) return;
  add_channel_bias_kernel<<<blocks_for(total), kThreads, 0, stream>>>(bias, C, HW, total, y);
  gpu::check_launch("add_channel_bias");
}

void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           gpu::Stream stream) {
  if (C == 0) return;
  if (N * C * HW >= INT32_MAX) {
    throw Error(
        "channel_bias_gradient on CUDA: tensors of 2^31 elements or more are not "
        "supported (dy has " +
        std::to_string(N * C * HW) + ")");
  }
  bias_gradient_kernel<<<unsigned(C), kThreads, 0, stream>>>(dy, int(N), int(C), int(HW), db);
  gpu::check_launch("channel_bias_gradient");
}

}  // namespace crema::kernels::cuda
