// The bias gradient of a channels-last convolution on the GPU: db[k] += sum over the M = N*P*Q
// rows of dy [M, K], for dy in f32, bf16 or f16, summed in fp32 into an fp32 db.
//
// The rows of one channel are K elements apart, so a thread per channel would read one element
// per 32-byte sector. Instead a warp reads 32 neighbouring channels of one row, and the rows are
// cut into fixed slices, so that there are enough blocks for a small K:
//   1. block (32 channels, one slice) of 32 x 8 threads: thread (channel, group) adds rows group,
//      group + 8, ... of its slice in order, the 8 group sums meet in a fixed tree in shared
//      memory, and the block writes partial[slice][channel] into the workspace;
//   2. one thread per channel adds its slices' partials in slice order, then adds that to db.
// The slices are a function of M only: the same dy gives the same bits on every run and GPU,
// with no atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/launch.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kColumns = 32, kRowGroups = 8;
constexpr int64_t kRowsPerSlice = 256;  // at least; more when M needs more than kMaxSlices
constexpr int64_t kMaxSlices = 512;

struct Slices {
  int64_t count, rows;  // slices, rows per slice (the last may have fewer)
};
Slices slices_for(int64_t M) {
  const int64_t count = std::min(kMaxSlices, std::max<int64_t>(1, ceil_div(M, kRowsPerSlice)));
  return {count, ceil_div(M, count)};
}

template <class T>
__global__ void slice_sums_kernel(const T* __restrict__ dy, int64_t M, int64_t K,
                                  int64_t rows_per_slice, float* __restrict__ partial) {
  __shared__ float sums[kRowGroups][kColumns];
  const int column = int(threadIdx.x), group = int(threadIdx.y);
  const int64_t k = blockIdx.x * int64_t(kColumns) + column, slice = blockIdx.y;
  const int64_t begin = slice * rows_per_slice;
  const int64_t end = begin + rows_per_slice < M ? begin + rows_per_slice : M;
  float sum = 0.0f;
  if (k < K) {
    for (int64_t m = begin + group; m < end; m += kRowGroups) sum += to_float(dy[m * K + k]);
  }
  sums[group][column] = sum;
  __syncthreads();
  for (int stride = kRowGroups / 2; stride > 0; stride /= 2) {
    if (group < stride) sums[group][column] += sums[group + stride][column];
    __syncthreads();
  }
  if (group == 0 && k < K) partial[slice * K + k] = sums[0][column];
}

__global__ void add_slices_kernel(const float* __restrict__ partial, int64_t slices, int64_t K,
                                  float* __restrict__ db) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= K) return;
  float sum = 0.0f;
  for (int64_t s = 0; s < slices; ++s) sum += partial[s * K + k];
  db[k] += sum;
}

}  // namespace

size_t conv2d_backward_bias_nhwc_workspace(const Conv2dGeometry& g) {
  return size_t(slices_for(g.N * g.P() * g.Q()).count * g.K);
}

template <class T>
void conv2d_backward_bias_nhwc(const Conv2dGeometry& g, const T* dy, float* db, float* workspace,
                               gpu::Stream stream) {
  const int64_t M = g.N * g.P() * g.Q(), K = g.K;
  const Slices s = slices_for(M);
  const dim3 block(kColumns, kRowGroups), grid(unsigned(ceil_div(K, kColumns)), unsigned(s.count));
  slice_sums_kernel<T><<<grid, block, 0, stream>>>(dy, M, K, s.rows, workspace);
  gpu::check_launch("conv2d_backward_bias_nhwc");
  add_slices_kernel<<<blocks_for(K), kThreads, 0, stream>>>(workspace, s.count, K, db);
  gpu::check_launch("conv2d_backward_bias_nhwc");
}

template void conv2d_backward_bias_nhwc<float>(const Conv2dGeometry&, const float*, float*, float*,
                                               gpu::Stream);
template void conv2d_backward_bias_nhwc<bf16_t>(const Conv2dGeometry&, const bf16_t*, float*,
                                                float*, gpu::Stream);
template void conv2d_backward_bias_nhwc<f16_t>(const Conv2dGeometry&, const f16_t*, float*, float*,
                                               gpu::Stream);

}  // namespace crema::kernels::cuda
