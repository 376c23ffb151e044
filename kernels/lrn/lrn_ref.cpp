// LRN, reference: the formulas of lrn.h, one element at a time, every window summed in full.
#include <cmath>

#include "kernels/lrn/lrn.h"

namespace crema::kernels::ref {
namespace {

int64_t at(const LrnShape& s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * s.C + c) * s.H + h) * s.W + w;
}

// sum over the window of (n, c, h, w) of f(index), zero-padded; and the divisor of alpha.
template <class F>
double window_sum(const LrnShape& s, const LrnParams& p, int64_t n, int64_t c, int64_t h, int64_t w,
                  const F& f) {
  const int64_t r = (p.local_size - 1) / 2;
  double sum = 0.0;
  if (p.region == LrnRegion::across_channels) {
    for (int64_t cc = c - r; cc <= c + r; ++cc) {
      if (cc >= 0 && cc < s.C) sum += f(at(s, n, cc, h, w));
    }
    return sum;
  }
  for (int64_t hh = h - r; hh <= h + r; ++hh) {
    for (int64_t ww = w - r; ww <= w + r; ++ww) {
      if (hh >= 0 && hh < s.H && ww >= 0 && ww < s.W) sum += f(at(s, n, c, hh, ww));
    }
  }
  return sum;
}

double window_size(const LrnParams& p) {
  const double n = double(p.local_size);
  return p.region == LrnRegion::across_channels ? n : n * n;
}

// Calls f(n, c, h, w) for every element.
template <class F>
void for_each(const LrnShape& s, const F& f) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t w = 0; w < s.W; ++w) f(n, c, h, w);
}

}  // namespace

template <class T>
void lrn_forward(const LrnShape& s, const LrnParams& p, const T* x, T* y, T* scale) {
  const double coef = double(p.alpha) / window_size(p);
  for_each(s, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    const int64_t i = at(s, n, c, h, w);
    const double squares =
        window_sum(s, p, n, c, h, w, [&](int64_t j) { return double(x[j]) * double(x[j]); });
    const double sc = double(p.k) + coef * squares;
    scale[i] = T(sc);
    y[i] = T(double(x[i]) * std::pow(sc, -double(p.beta)));
  });
}

template <class T>
void lrn_backward(const LrnShape& s, const LrnParams& p, const T* x, const T* y, const T* scale,
                  const T* dy, T* dx) {
  const double coef = 2.0 * double(p.alpha) * double(p.beta) / window_size(p);
  for_each(s, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    const int64_t i = at(s, n, c, h, w);
    const double ratios = window_sum(s, p, n, c, h, w, [&](int64_t j) {
      return double(dy[j]) * double(y[j]) / double(scale[j]);
    });
    dx[i] = T(double(dy[i]) * std::pow(double(scale[i]), -double(p.beta)) -
              coef * double(x[i]) * ratios);
  });
}

template void lrn_forward<float>(const LrnShape&, const LrnParams&, const float*, float*, float*);
template void lrn_forward<double>(const LrnShape&, const LrnParams&, const double*, double*,
                                  double*);
template void lrn_backward<float>(const LrnShape&, const LrnParams&, const float*, const float*,
                                  const float*, const float*, float*);
template void lrn_backward<double>(const LrnShape&, const LrnParams&, const double*, const double*,
                                   const double*, const double*, double*);

}  // namespace crema::kernels::ref
