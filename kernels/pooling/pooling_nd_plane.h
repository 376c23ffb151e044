// One plane of N-d pooling on the padded 3-axis form (pooling_nd.h): the loops the reference
// runs plane after plane and the CPU path runs a plane per thread, in T (float or double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/pooling/pooling_nd.h"

namespace crema::kernels::pooling_detail {

// Output `o`'s window clipped to the input, [lo[a], hi[a]) per axis, and the average's divisor.
struct NdWindow {
  int64_t lo[3], hi[3], size;
};

inline NdWindow window_of(const PoolNdGeometry& g, const int64_t (&o)[3]) {
  NdWindow w{};
  int64_t padded = 1, inside = 1;
  for (int a = 0; a < 3; ++a) {
    const int64_t start = o[a] * g.stride[a] - g.pad[a];
    const int64_t end = std::min(start + g.kernel[a], g.in[a] + g.pad[a]);
    w.lo[a] = std::max<int64_t>(start, 0);
    w.hi[a] = std::min(end, g.in[a]);
    padded *= end - start;
    inside *= w.hi[a] - w.lo[a];
  }
  w.size = g.count_include_pad ? padded : inside;
  return w;
}

// Calls f(flat index within the plane) for the window's elements in row-major order.
template <class F>
void for_each_in(const PoolNdGeometry& g, const NdWindow& w, F f) {
  for (int64_t d = w.lo[0]; d < w.hi[0]; ++d) {
    for (int64_t h = w.lo[1]; h < w.hi[1]; ++h) {
      for (int64_t x = w.lo[2]; x < w.hi[2]; ++x) f((d * g.in[1] + h) * g.in[2] + x);
    }
  }
}

// Calls f(flat output index, its window) for every output of the plane in row-major order.
template <class F>
void for_each_window(const PoolNdGeometry& g, F f) {
  int64_t index = 0;
  for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
    for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
      for (int64_t o2 = 0; o2 < g.out[2]; ++o2) f(index++, window_of(g, {o0, o1, o2}));
    }
  }
}

// g padded; x and y (and argmax, which may be null) one plane's.
template <class T>
void pool_plane_forward(const PoolNdGeometry& g, PoolMode mode, const T* x, T* y, T* argmax) {
  for_each_window(g, [&](int64_t out, const NdWindow& w) {
    if (mode == PoolMode::max) {
      int64_t best = (w.lo[0] * g.in[1] + w.lo[1]) * g.in[2] + w.lo[2];
      for_each_in(g, w, [&](int64_t i) {
        if (x[i] > x[best] || (std::isnan(x[i]) && !std::isnan(x[best]))) best = i;
      });
      y[out] = x[best];
      if (argmax != nullptr) argmax[out] = T(best);
    } else {
      T sum = 0;
      for_each_in(g, w, [&](int64_t i) { sum += x[i]; });
      y[out] = sum / T(w.size);
    }
  });
}

// dx (one plane) written: zeroed, then scattered into in output order.
template <class T>
void pool_plane_backward(const PoolNdGeometry& g, PoolMode mode, const T* dy, const T* argmax,
                         T* dx) {
  std::fill(dx, dx + g.in[0] * g.in[1] * g.in[2], T(0));
  for_each_window(g, [&](int64_t out, const NdWindow& w) {
    if (mode == PoolMode::max) {
      dx[int64_t(argmax[out])] += dy[out];
      return;
    }
    const T share = dy[out] / T(w.size);
    for_each_in(g, w, [&](int64_t i) { dx[i] += share; });
  });
}

}  // namespace crema::kernels::pooling_detail
