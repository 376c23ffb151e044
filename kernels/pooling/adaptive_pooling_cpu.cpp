// Adaptive 2-D pooling, CPU path: the reference's loops for one (n, c) plane at a time, the planes
// spread over OpenMP threads (no output shared between threads, so the result does not depend on
// the thread count). Adaptive windows are not affine in the output index, so pooling_cpu.cpp's
// vectorization across columns does not apply; the sizes where it would (P divides H, Q divides
// W) run pool2d instead (layers/pooling.cpp).
#include <algorithm>

#include "kernels/pooling/adaptive_pooling.h"

namespace crema::kernels::cpu {
namespace {

// Planes of H*W elements below this many in total are pooled on one thread: a parallel region
// costs a few microseconds, more than the work.
constexpr int64_t kParallelElements = 1 << 15;

// One plane's geometry: N = C = 1.
AdaptivePool2dGeometry plane_of(const AdaptivePool2dGeometry& g) {
  return {1, 1, g.H, g.W, g.P, g.Q};
}

}  // namespace

void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* x,
                             float* y, float* argmax, int num_threads) {
  const AdaptivePool2dGeometry one = plane_of(g);
  const int64_t planes = g.N * g.C, in = g.H * g.W, out = g.P * g.Q;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (planes * in >= kParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    ref::adaptive_pool2d_forward(one, mode, x + plane * in, y + plane * out,
                                 argmax != nullptr ? argmax + plane * out : nullptr);
  }
}

void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const float* dy,
                              const float* argmax, float* dx, int num_threads) {
  const AdaptivePool2dGeometry one = plane_of(g);
  const int64_t planes = g.N * g.C, in = g.H * g.W, out = g.P * g.Q;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (planes * in >= kParallelElements)
  for (int64_t plane = 0; plane < planes; ++plane) {
    ref::adaptive_pool2d_backward(one, mode, dy + plane * out,
                                  argmax != nullptr ? argmax + plane * out : nullptr,
                                  dx + plane * in);
  }
}

}  // namespace crema::kernels::cpu
