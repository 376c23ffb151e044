// Softmax and log-softmax, CUDA versions. Tensors are [outer, C, inner]; a position (o, i) owns
// one distribution over C classes, `inner` floats apart.
//
//   SoftmaxVersion::thread_per_position  one thread per position walks its C classes three times
//                                 (max; exp and sum; scale, or for log-softmax subtract log(s)).
//                                 Coalesced across threads when inner > 1 (neighbouring threads,
//                                 neighbouring i); when inner == 1 a warp reads 32 rows C floats
//                                 apart, which is fine for small C (LeNet's 10 classes sit in a
//                                 few cache lines).
//   SoftmaxVersion::warp_per_position    one warp per position, lane l taking classes l, l+32, ...;
//                                 the max and the sums go through warp butterflies. Coalesced when
//                                 inner == 1 and uses 32x more threads: the one for wide rows
//                                 (ImageNet's 1000 classes).
//   SoftmaxVersion::by_shape             warp_per_position when inner == 1 and C > 16, else
//                                 thread_per_position (the production choice).
//
// The per-distribution device functions live in softmax_cuda.cuh (shared with the cross-entropy
// in kernels/loss/softmax_cross_entropy_cuda.cu); the kernels here are templated on kLog,
// log-softmax or not, and the forward on kFast, the fast softmax (no max pass).
#include "kernels/softmax/softmax_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;
using namespace softmax_detail;

template <bool kLog, bool kFast>
__global__ void forward_thread_kernel(int64_t outer, int64_t C, int64_t inner, const float* x,
                                      float* y) {
  for (int64_t pos = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    softmax_thread<kLog, kFast>(C, inner, x + base, y + base);
  }
}

// The loop bound is the same for every lane of a warp, so the butterflies see all 32 lanes.
template <bool kLog, bool kFast>
__global__ void forward_warp_kernel(int64_t outer, int64_t C, int64_t inner, const float* x,
                                    float* y) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t pos = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; pos < outer * inner;
       pos += warps) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    softmax_warp<kLog, kFast>(C, inner, x + base, y + base, lane);
  }
}

template <bool kLog>
__global__ void backward_thread_kernel(int64_t outer, int64_t C, int64_t inner, const float* y,
                                       const float* dy, float* dx) {
  for (int64_t pos = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    softmax_backward_thread<kLog>(C, inner, y + base, dy + base, dx + base);
  }
}

template <bool kLog>
__global__ void backward_warp_kernel(int64_t outer, int64_t C, int64_t inner, const float* y,
                                     const float* dy, float* dx) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t pos = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; pos < outer * inner;
       pos += warps) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    softmax_backward_warp<kLog>(C, inner, y + base, dy + base, dx + base, lane);
  }
}

template <bool kLog, bool kFast = false>
void launch_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                    SoftmaxVersion version, gpu::Stream stream, const char* what) {
  const int64_t positions = outer * inner;
  if (positions == 0 || C == 0) return;
  const bool warps = use_warps(version, C, inner);
  const int blocks = position_blocks(positions, warps);
  if (warps) {
    forward_warp_kernel<kLog, kFast><<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, x, y);
  } else {
    forward_thread_kernel<kLog, kFast>
        <<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, x, y);
  }
  gpu::check_launch(what);
}

template <bool kLog>
void launch_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                     float* dx, SoftmaxVersion version, gpu::Stream stream, const char* what) {
  const int64_t positions = outer * inner;
  if (positions == 0 || C == 0) return;
  const bool warps = use_warps(version, C, inner);
  const int blocks = position_blocks(positions, warps);
  if (warps) {
    backward_warp_kernel<kLog><<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, y, dy, dx);
  } else {
    backward_thread_kernel<kLog><<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, y, dy, dx);
  }
  gpu::check_launch(what);
}

}  // namespace

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     SoftmaxVersion version, gpu::Stream stream) {
  launch_forward<false>(outer, C, inner, x, y, version, stream, "softmax_forward");
}

void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                          SoftmaxVersion version, gpu::Stream stream) {
  launch_forward<false, true>(outer, C, inner, x, y, version, stream, "softmax_fast_forward");
}

void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, SoftmaxVersion version, gpu::Stream stream) {
  launch_backward<false>(outer, C, inner, y, dy, dx, version, stream, "softmax_backward");
}

void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         SoftmaxVersion version, gpu::Stream stream) {
  launch_forward<true>(outer, C, inner, x, y, version, stream, "log_softmax_forward");
}

void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, SoftmaxVersion version, gpu::Stream stream) {
  launch_backward<true>(outer, C, inner, y, dy, dx, version, stream, "log_softmax_backward");
}

}  // namespace crema::kernels::cuda
