// PReLU, CUDA. forward and backward_data: one grid-stride elementwise kernel each, the channel of
// element i being (i / D) % C. backward_slope, the reduction dslope[c] += sum over (n, d) with
// x <= 0 of x * dy, in two versions (no float atomics in either: the same bits every run):
//   block_per_channel  one block per channel walks the channel's N * D positions, every thread in
//                      a fixed stride, accumulating in double; the block's threads are added in a
//                      fixed tree (reduce_cuda.cuh's block_sum).
//   split_channel      the same over each of `slices` contiguous slices of a channel, one block per
//                      (channel, slice), the slice sums stored in the workspace and added in slice
//                      order by one block per channel: with a shared slope (C = 1) the first
//                      version runs one block on one SM, this one up to 64.
#include "kernels/activations/prelu.h"
#include "kernels/common/map_cuda.cuh"
#include "kernels/common/reduce_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;
using detail::Partial;

// Positions per slice worth a block of its own (16 per thread), and the most slices per channel.
constexpr int64_t kSliceElements = 16 * kReduceThreads;
constexpr int64_t kMaxSlices = 64;

__global__ void forward_kernel(int64_t n, int64_t C, int64_t D, const float* x,
                               const float* __restrict__ slope, float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : slope[(i / D) % C] * v;
  }
}

__global__ void backward_data_kernel(int64_t n, int64_t C, int64_t D, const float* __restrict__ x,
                                     const float* __restrict__ slope, const float* dy, float* dx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dx[i] = x[i] > 0.0f ? dy[i] : slope[(i / D) % C] * dy[i];
  }
}

// The sum of x * dy over positions p in [begin, end) of channel c, where x <= 0, in double:
// position p is (n, d) = (p / D, p % D), element (n * C + c) * D + d. Every thread must call it.
__device__ double slice_sum(int64_t C, int64_t D, int64_t c, int64_t begin, int64_t end,
                            const float* __restrict__ x, const float* __restrict__ dy) {
  double sum = 0.0;
  for (int64_t p = begin + threadIdx.x; p < end; p += kReduceThreads) {
    const int64_t n = p / D, i = (n * C + c) * D + (p - n * D);
    const float v = x[i];
    if (!(v > 0.0f)) sum += double(v) * double(dy[i]);
  }
  return detail::block_sum(Partial{sum, 0}).value;
}

// Grid: C blocks.
__global__ void slope_per_channel_kernel(int64_t N, int64_t C, int64_t D,
                                         const float* __restrict__ x, const float* __restrict__ dy,
                                         float* dslope) {
  const int64_t c = blockIdx.x;
  const double sum = slice_sum(C, D, c, 0, N * D, x, dy);
  if (threadIdx.x == 0) dslope[c] += float(sum);
}

// Grid: C * slices blocks, block b taking slice b % slices of channel b / slices.
__global__ void slope_slices_kernel(int64_t N, int64_t C, int64_t D, int64_t slices,
                                    const float* __restrict__ x, const float* __restrict__ dy,
                                    double* partials) {
  const int64_t c = blockIdx.x / slices, s = blockIdx.x % slices;
  const int64_t M = N * D, length = (M + slices - 1) / slices;
  const int64_t begin = s * length, end = begin + length < M ? begin + length : M;
  const double sum = slice_sum(C, D, c, begin, end, x, dy);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Grid: C blocks; adds channel c's slices partials[c * slices, (c + 1) * slices) in order.
__global__ void slope_finish_kernel(int64_t slices, const double* partials, float* dslope) {
  const int64_t c = blockIdx.x;
  double sum = 0.0;
  for (int64_t s = threadIdx.x; s < slices; s += kReduceThreads) sum += partials[c * slices + s];
  sum = detail::block_sum(Partial{sum, 0}).value;
  if (threadIdx.x == 0) dslope[c] += float(sum);
}

int64_t slices_per_channel(int64_t N, int64_t D) {
  const int64_t want = (N * D + kSliceElements - 1) / kSliceElements;
  return want < 1 ? 1 : (want > kMaxSlices ? kMaxSlices : want);
}

}  // namespace

void prelu_forward(int64_t N, int64_t C, int64_t D, const float* x, const float* slope, float* y,
                   gpu::Stream stream) {
  const int64_t n = N * C * D;
  if (n <= 0) return;
  forward_kernel<<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(n, C, D, x, slope, y);
  gpu::check_launch("prelu_forward");
}

void prelu_backward_data(int64_t N, int64_t C, int64_t D, const float* x, const float* slope,
                         const float* dy, float* dx, gpu::Stream stream) {
  const int64_t n = N * C * D;
  if (n <= 0) return;
  backward_data_kernel<<<detail::map_blocks(n), detail::kMapThreads, 0, stream>>>(n, C, D, x, slope,
                                                                                  dy, dx);
  gpu::check_launch("prelu_backward_data");
}

size_t prelu_backward_slope_workspace(int64_t N, int64_t C, int64_t D, PreluVersion version) {
  if (version != PreluVersion::split_channel) return 0;
  const int64_t slices = slices_per_channel(N, D);
  return slices > 1 ? size_t(C * slices) * (sizeof(double) / sizeof(float)) : 0;
}

void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const float* x, const float* dy,
                          float* dslope, float* workspace, PreluVersion version,
                          gpu::Stream stream) {
  if (C <= 0 || N * D <= 0) return;  // nothing to add
  const int64_t slices =
      version == PreluVersion::split_channel ? slices_per_channel(N, D) : int64_t(1);
  if (slices == 1) {
    slope_per_channel_kernel<<<unsigned(C), kReduceThreads, 0, stream>>>(N, C, D, x, dy, dslope);
    gpu::check_launch("prelu_backward_slope");
    return;
  }
  double* partials = reinterpret_cast<double*>(workspace);  // [C, slices]
  slope_slices_kernel<<<unsigned(C * slices), kReduceThreads, 0, stream>>>(N, C, D, slices, x, dy,
                                                                           partials);
  gpu::check_launch("prelu_backward_slope (slices)");
  slope_finish_kernel<<<unsigned(C), kReduceThreads, 0, stream>>>(slices, partials, dslope);
  gpu::check_launch("prelu_backward_slope (finish)");
}

}  // namespace crema::kernels::cuda
