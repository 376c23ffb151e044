// 2-D pooling, reference: one loop per index of the definition in pooling.h.
#include "kernels/pooling/pooling.h"

#include <algorithm>
#include <cmath>

namespace crema::kernels::ref {
namespace {

// Output (p, q)'s window clipped to the input: rows [hs, he), columns [ws, we), and the divisor of
// average pooling (the window clipped to the padded input, or to the input without
// count_include_pad).
struct Window {
  int64_t hs, he, ws, we, size;
};

Window window_of(const Pool2dGeometry& g, int64_t p, int64_t q) {
  const int64_t h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
  const int64_t h1 = std::min(h0 + g.kernel_h, g.H + g.pad_h);
  const int64_t w1 = std::min(w0 + g.kernel_w, g.W + g.pad_w);
  const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, g.H);
  const int64_t ws = std::max<int64_t>(w0, 0), we = std::min(w1, g.W);
  return {hs, he, ws, we, g.count_include_pad ? (h1 - h0) * (w1 - w0) : (he - hs) * (we - ws)};
}

}  // namespace

template <class T>
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const T* x, T* y, T* argmax) {
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    const T* xp = x + plane * g.H * g.W;  // [H, W]
    for (int64_t p = 0; p < g.P; ++p) {
      for (int64_t q = 0; q < g.Q; ++q) {
        const auto [hs, he, ws, we, window_size] = window_of(g, p, q);
        const int64_t out = plane * g.P * g.Q + p * g.Q + q;
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
          y[out] = sum / T(window_size);
        }
      }
    }
  }
}

template <class T>
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const T* dy, const T* argmax, T* dx) {
  std::fill(dx, dx + g.N * g.C * g.H * g.W, T(0));
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    T* dxp = dx + plane * g.H * g.W;  // [H, W]
    for (int64_t p = 0; p < g.P; ++p) {
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t out = plane * g.P * g.Q + p * g.Q + q;
        if (mode == PoolMode::max) {
          dxp[int64_t(argmax[out])] += dy[out];
          continue;
        }
        const auto [hs, he, ws, we, window_size] = window_of(g, p, q);
        const T share = dy[out] / T(window_size);
        for (int64_t h = hs; h < he; ++h) {
          for (int64_t w = ws; w < we; ++w) dxp[h * g.W + w] += share;
        }
      }
    }
  }
}

template void pool2d_forward<float>(const Pool2dGeometry&, PoolMode, const float*, float*, float*);
template void pool2d_forward<double>(const Pool2dGeometry&, PoolMode, const double*, double*,
                                     double*);
template void pool2d_backward<float>(const Pool2dGeometry&, PoolMode, const float*, const float*,
                                     float*);
template void pool2d_backward<double>(const Pool2dGeometry&, PoolMode, const double*, const double*,
                                      double*);

}  // namespace crema::kernels::ref
