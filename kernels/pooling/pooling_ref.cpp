// 2-D pooling, reference: one loop per index of the definition in pooling.h, in either layout
// (a plane (n, c) is H*W elements one apart in nchw, C apart in nhwc: plane_of).
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

// Plane (n, c) of an [N, C, area] tensor in `layout`: its element i (h*W + w, or p*Q + q) lies
// at base + i * step.
struct Plane {
  int64_t base, step;
  int64_t operator[](int64_t i) const { return base + i * step; }
};

Plane plane_of(Layout layout, int64_t n, int64_t c, int64_t C, int64_t area) {
  return layout == Layout::nhwc ? Plane{n * area * C + c, C} : Plane{(n * C + c) * area, 1};
}

}  // namespace

template <class T>
void pool2d_forward(const Pool2dGeometry& g, PoolMode mode, const T* x, T* y, T* argmax,
                    Layout layout) {
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t c = 0; c < g.C; ++c) {
      const Plane in = plane_of(layout, n, c, g.C, g.H * g.W);
      const Plane out = plane_of(layout, n, c, g.C, g.P * g.Q);
      for (int64_t p = 0; p < g.P; ++p) {
        for (int64_t q = 0; q < g.Q; ++q) {
          const auto [hs, he, ws, we, window_size] = window_of(g, p, q);
          const int64_t o = out[p * g.Q + q];
          if (mode == PoolMode::max) {
            int64_t best = hs * g.W + ws;
            for (int64_t h = hs; h < he; ++h) {
              for (int64_t w = ws; w < we; ++w) {
                const T v = x[in[h * g.W + w]], m = x[in[best]];
                if (v > m || (std::isnan(v) && !std::isnan(m))) best = h * g.W + w;
              }
            }
            y[o] = x[in[best]];
            if (argmax != nullptr) argmax[o] = T(best);
          } else {
            T sum = 0;
            for (int64_t h = hs; h < he; ++h) {
              for (int64_t w = ws; w < we; ++w) sum += x[in[h * g.W + w]];
            }
            y[o] = sum / T(window_size);
          }
        }
      }
    }
  }
}

template <class T>
void pool2d_backward(const Pool2dGeometry& g, PoolMode mode, const T* dy, const T* argmax, T* dx,
                     Layout layout) {
  std::fill(dx, dx + g.N * g.C * g.H * g.W, T(0));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t c = 0; c < g.C; ++c) {
      const Plane in = plane_of(layout, n, c, g.C, g.H * g.W);
      const Plane out = plane_of(layout, n, c, g.C, g.P * g.Q);
      for (int64_t p = 0; p < g.P; ++p) {
        for (int64_t q = 0; q < g.Q; ++q) {
          const int64_t o = out[p * g.Q + q];
          if (mode == PoolMode::max) {
            dx[in[int64_t(argmax[o])]] += dy[o];
            continue;
          }
          const auto [hs, he, ws, we, window_size] = window_of(g, p, q);
          const T share = dy[o] / T(window_size);
          for (int64_t h = hs; h < he; ++h) {
            for (int64_t w = ws; w < we; ++w) dx[in[h * g.W + w]] += share;
          }
        }
      }
    }
  }
}

template void pool2d_forward<float>(const Pool2dGeometry&, PoolMode, const float*, float*, float*,
                                    Layout);
template void pool2d_forward<double>(const Pool2dGeometry&, PoolMode, const double*, double*,
                                     double*, Layout);
template void pool2d_backward<float>(const Pool2dGeometry&, PoolMode, const float*, const float*,
                                     float*, Layout);
template void pool2d_backward<double>(const Pool2dGeometry&, PoolMode, const double*, const double*,
                                      double*, Layout);

}  // namespace crema::kernels::ref
