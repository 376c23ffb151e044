// Adaptive 2-D pooling, reference: one loop per index of the definition in adaptive_pooling.h.
#include <algorithm>
#include <cmath>

#include "kernels/pooling/adaptive_pooling.h"

namespace crema::kernels::ref {

template <class T>
void adaptive_pool2d_forward(const AdaptivePool2dGeometry& g, PoolMode mode, const T* x, T* y,
                             T* argmax) {
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    const T* xp = x + plane * g.H * g.W;  // [H, W]
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t hs = adaptive_start(p, g.H, g.P), he = adaptive_end(p, g.H, g.P);
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t ws = adaptive_start(q, g.W, g.Q), we = adaptive_end(q, g.W, g.Q);
        const int64_t out = (plane * g.P + p) * g.Q + q;
        if (mode == PoolMode::max) {
          int64_t best = hs * g.W + ws;
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) {
              const T v = xp[h * g.W + w], m = xp[best];
              if (v > m || (std::isnan(v) && !std::isnan(m))) best = h * g.W + w;
            }
          }
          y[out] = xp[best];
          if (argmax != nullptr) argmax[out] = T(best);
        } else {
          T sum = 0;
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) sum += xp[h * g.W + w];
          }
          y[out] = sum / T((he - hs) * (we - ws));
        }
      }
    }
  }
}

template <class T>
void adaptive_pool2d_backward(const AdaptivePool2dGeometry& g, PoolMode mode, const T* dy,
                              const T* argmax, T* dx) {
  std::fill(dx, dx + g.N * g.C * g.H * g.W, T(0));
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    T* dxp = dx + plane * g.H * g.W;  // [H, W]
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t hs = adaptive_start(p, g.H, g.P), he = adaptive_end(p, g.H, g.P);
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t out = (plane * g.P + p) * g.Q + q;
        if (mode == PoolMode::max) {
          dxp[int64_t(argmax[out])] += dy[out];
          continue;
        }
        const int64_t ws = adaptive_start(q, g.W, g.Q), we = adaptive_end(q, g.W, g.Q);
        const T share = dy[out] / T((he - hs) * (we - ws));
        for (int64_t h = hs; h < he; ++h) {
          for (int64_t w = ws; w < we; ++w) dxp[h * g.W + w] += share;
        }
      }
    }
  }
}

template void adaptive_pool2d_forward<float>(const AdaptivePool2dGeometry&, PoolMode, const float*,
                                             float*, float*);
template void adaptive_pool2d_forward<double>(const AdaptivePool2dGeometry&, PoolMode,
                                              const double*, double*, double*);
template void adaptive_pool2d_backward<float>(const AdaptivePool2dGeometry&, PoolMode, const float*,
                                              const float*, float*);
template void adaptive_pool2d_backward<double>(const AdaptivePool2dGeometry&, PoolMode,
                                               const double*, const double*, double*);

}  // namespace crema::kernels::ref
