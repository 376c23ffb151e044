// The counting launch of count_cuda.cuh: a grid-stride pass, then a fixed tree per block.
#include "kernels/common/count_cuda.cuh"

namespace crema::kernels::cuda::detail {
namespace {

__global__ void count_not_ignored_kernel(int64_t n, const float* __restrict__ values,
                                         IgnoreRule rule, Partial* counts) {
  Partial p{0.0, 0};
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    p.count += is_ignored(values[k], rule) ? 0 : 1;
  }
  p = block_sum(p);
  if (threadIdx.x == 0) counts[blockIdx.x] = p;
}

}  // namespace

void count_not_ignored(int64_t n, const float* values, IgnoreRule rule, Partial* counts,
                       const char* what, gpu::Stream stream) {
  count_not_ignored_kernel<<<count_blocks(n), kReduceThreads, 0, stream>>>(n, values, rule, counts);
  gpu::check_launch(what);
}

}  // namespace crema::kernels::cuda::detail
