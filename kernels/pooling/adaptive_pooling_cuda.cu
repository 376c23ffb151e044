// Adaptive 2-D pooling, CUDA (one version each, as pool2d: memory-bound, and the windows are
// small). Forward: one thread per output (n, c, p, q), its window in row-major order with the
// reference's comparison (larger, or the first NaN), so ties, NaN and the argmax are the CPU's.
// Backward: one thread per input element (n, c, h, w), gathering dy[p, q] of the windows that
// contain it, p in [floor(h P / H), ceil((h + 1) P / H)) and q likewise (adaptive_pooling.h), in
// (p, q) row-major order from 0: the additions of the CPU's scatter in its order, so the same
// bits, and no two threads write one element (no atomics, deterministic).
#include "kernels/common/map_cuda.cuh"
#include "kernels/pooling/adaptive_pooling.h"

namespace crema::kernels::cuda {
namespace {

using detail::kMapThreads;
using detail::map_blocks;

// Index: the type of flat element indices (int32 when the tensors allow it: cheaper division).
template <class Index, PoolMode kMode>
__global__ void adaptive_forward_kernel(AdaptivePool2dGeometry g, Index total,
                                        const float* __restrict__ x, float* __restrict__ y,
                                        float* __restrict__ argmax) {
  const int H = int(g.H), W = int(g.W), P = int(g.P), Q = int(g.Q);
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total;
       idx += Index(gridDim.x) * blockDim.x) {
    const int q = int(idx % Q);
    const Index rest = idx / Q;
    const int p = int(rest % P);
    const Index plane = rest / P;
    const float* xp = x + plane * H * W;  // [H, W]
    const int hs = int(adaptive_start(p, H, P)), he = int(adaptive_end(p, H, P));
    const int ws = int(adaptive_start(q, W, Q)), we = int(adaptive_end(q, W, Q));
    if constexpr (kMode == PoolMode::max) {
      int best = hs * W + ws;
      float m = xp[best];
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) {
          const float v = xp[h * W + w];
          if (v > m || (isnan(v) && !isnan(m))) {  // larger, or the first NaN
            m = v;
            best = h * W + w;
          }
        }
      }
      y[idx] = m;
      if (argmax != nullptr) argmax[idx] = float(best);
    } else {
      float sum = 0.0f;
      for (int h = hs; h < he; ++h) {
        for (int w = ws; w < we; ++w) sum += xp[h * W + w];
      }
      y[idx] = sum / float((he - hs) * (we - ws));
    }
  }
}

template <class Index, PoolMode kMode>
__global__ void adaptive_backward_kernel(AdaptivePool2dGeometry g, Index total,
                                         const float* __restrict__ dy,
                                         const float* __restrict__ argmax, float* __restrict__ dx) {
  const int H = int(g.H), W = int(g.W), P = int(g.P), Q = int(g.Q);
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total;
       idx += Index(gridDim.x) * blockDim.x) {
    const int w = int(idx % W);
    const Index rest = idx / W;
    const int h = int(rest % H);
    const Index plane = rest / H;
    // The windows containing row h and column w (adaptive_pooling.h), clipped to the outputs.
    const int p0 = int(int64_t(h) * P / H), p1 = min(int((int64_t(h + 1) * P + H - 1) / H), P);
    const int q0 = int(int64_t(w) * Q / W), q1 = min(int((int64_t(w + 1) * Q + W - 1) / W), Q);
    const float* dyp = dy + plane * P * Q;  // [P, Q]
    float acc = 0.0f;
    if constexpr (kMode == PoolMode::max) {
      const float* ap = argmax + plane * P * Q;
      const float me = float(h * W + w);
      for (int p = p0; p < p1; ++p) {
        for (int q = q0; q < q1; ++q) {
          if (ap[p * Q + q] == me) acc += dyp[p * Q + q];
        }
      }
    } else {
      for (int p = p0; p < p1; ++p) {
        const int rows = int(adaptive_end(p, H, P) - adaptive_start(p, H, P));
        for (int q = q0; q < q1; ++q) {
          const int cols = int(adaptive_end(q, W, Q) - adaptive_start(q, W, Q));
          acc += dyp[p * Q + q] / float(rows * cols);
        }
      }
    }
    dx[idx] = acc;
  }
}

template <class Index>
void launch_forward(const AdaptivePool2dGeometry& g, int64_t total, PoolMode mode, const float* x,
                    float* y, float* argmax, gpu::Stream stream) {
  const int blocks = map_blocks(total);
  if (mode == PoolMode::max) {
    adaptive_forward_kernel<Index, PoolMode::max>
        <<<blocks, kMapThreads, 0, stream>>>(g, Index(total), x, y, argmax);
  } else {
    adaptive_forward_kernel<Index, PoolMode::average>
        <<<blocks, kMapThreads, 0, stream>>>(g, Index(total), x, y, nullptr);
  }
  gpu::check_launch("adaptive_pool2d_forward");
}

template <class Index>
void launch_backward(const AdaptivePool2dGeometry& g, int64_t total, PoolMode mode, const float* dy,
                     const float* argmax, float* dx, gpu::Stream stream) {
  const int blocks = map_blocks(total);
  if (mode == PoolMode::max) {
    adaptive_backward_kernel<Index, PoolMode::max>
        <<<blocks, kMapThreads, 0, stream>>>(g, Index(total), dy, argmax, dx);
  } else {
    adaptive_backward_kernel<Index, PoolMode::average>
        <<<blocks, kMapThreads, 0, stream>>>(g, Index(total), dy, nullptr, dx);
  }
  gpu::check_launch("adaptive_pool2d_backward");
}

}  // namespace

void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* x,
                             float* y, float* argmax, gpu::Stream stream) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  if (total == 0) return;
  if (detail::int32_indexable(total) && detail::int32_indexable(g.N * g.C * g.H * g.W)) {
    launch_forward<int32_t>(g, total, mode, x, y, argmax, stream);
  } else {
    launch_forward<int64_t>(g, total, mode, x, y, argmax, stream);
  }
}

void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* dy,
                              const float* argmax, float* dx, gpu::Stream stream) {
  const int64_t total = g.N * g.C * g.H * g.W;
  if (total == 0) return;
  if (detail::int32_indexable(total) && detail::int32_indexable(g.N * g.C * g.P * g.Q)) {
    launch_backward<int32_t>(g, total, mode, dy, argmax, dx, stream);
  } else {
    launch_backward<int64_t>(g, total, mode, dy, argmax, dx, stream);
  }
}

}  // namespace crema::kernels::cuda
