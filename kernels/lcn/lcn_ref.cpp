// Divisive / local contrast normalization, reference: the formulas of lcn.h, one element and one
// window at a time, in T. The oracle of the tests; the f64 path of the dispatch.
#include <cmath>
#include <vector>

#include "kernels/lcn/lcn.h"

namespace crema::kernels::ref {
namespace {

// sum over the window of (n, c, h, w) of v, positions outside the image counting as zero.
template <class T>
T window_sum(const LcnShape& s, int half, const std::vector<T>& v, int64_t plane, int64_t h,
             int64_t w) {
  T sum = 0;
  for (int64_t i = h - half; i <= h + half; ++i) {
    for (int64_t j = w - half; j <= w + half; ++j) {
      if (i >= 0 && i < s.H && j >= 0 && j < s.W) sum += v[size_t((plane * s.H + i) * s.W + j)];
    }
  }
  return sum;
}

// out[p] = f(p, window sum of v at p), over every element p.
template <class T, class F>
void for_each_window(const LcnShape& s, int half, const std::vector<T>& v, F f) {
  for (int64_t plane = 0; plane < s.N * s.C; ++plane) {
    for (int64_t h = 0; h < s.H; ++h) {
      for (int64_t w = 0; w < s.W; ++w) {
        f((plane * s.H + h) * s.W + w, window_sum(s, half, v, plane, h, w));
      }
    }
  }
}

template <class T>
T blend(T alpha, T value, T beta, T out) {
  return beta == T(0) ? alpha * value : alpha * value + beta * out;
}

// box(v) = window sum / n^2.
template <class T>
std::vector<T> box_mean(const LcnShape& s, const LcnParams& p, const std::vector<T>& v) {
  std::vector<T> m(v.size());
  const T n2 = T(p.local_size) * T(p.local_size);
  for_each_window(s, p.local_size / 2, v, [&](int64_t e, T sum) { m[size_t(e)] = sum / n2; });
  return m;
}

// t = x - means and d = k + alpha_n / n^2 * window sum of t^2.
template <class T>
void centred_and_denominator(const LcnShape& s, const LcnParams& p, const T* x, const T* means,
                             std::vector<T>& t, std::vector<T>& d) {
  const size_t n = size_t(s.numel());
  t.resize(n);
  d.resize(n);
  std::vector<T> t2(n);
  for (size_t e = 0; e < n; ++e) {
    t[e] = x[e] - (means ? means[e] : T(0));
    t2[e] = t[e] * t[e];
  }
  const T scale = T(p.alpha) / (T(p.local_size) * T(p.local_size));
  for_each_window(s, p.local_size / 2, t2,
                  [&](int64_t e, T sum) { d[size_t(e)] = T(p.k) + scale * sum; });
}

}  // namespace

template <class T>
void divnorm_forward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* means,
                     T beta, T* y) {
  std::vector<T> t, d;
  centred_and_denominator(s, p, x, means, t, d);
  for (size_t e = 0; e < t.size(); ++e) {
    y[e] = blend(alpha, t[e] * std::pow(d[e], -T(p.beta)), beta, y[e]);
  }
}

template <class T>
void divnorm_backward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* means,
                      const T* dy, T beta, T* dx, T* dmeans) {
  std::vector<T> t, d;
  centred_and_denominator(s, p, x, means, t, d);
  std::vector<T> u(t.size());  // g[p] t[p] d[p]^(-beta_n - 1)
  for (size_t e = 0; e < t.size(); ++e) u[e] = dy[e] * t[e] * std::pow(d[e], -T(p.beta) - 1);
  const T scale = 2 * T(p.alpha) * T(p.beta) / (T(p.local_size) * T(p.local_size));
  for_each_window(s, p.local_size / 2, u, [&](int64_t e, T sum) {
    const size_t q = size_t(e);
    const T dt = dy[q] * std::pow(d[q], -T(p.beta)) - scale * t[q] * sum;
    dx[q] = blend(alpha, dt, beta, dx[q]);
    if (dmeans) dmeans[q] = blend(alpha, -dt, beta, dmeans[q]);
  });
}

template <class T>
void lcn_forward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, T beta, T* y) {
  const std::vector<T> m = box_mean(s, p, std::vector<T>(x, x + s.numel()));
  divnorm_forward(s, p, alpha, x, m.data(), beta, y);
}

template <class T>
void lcn_backward(const LcnShape& s, const LcnParams& p, T alpha, const T* x, const T* dy, T beta,
                  T* dx) {
  const std::vector<T> m = box_mean(s, p, std::vector<T>(x, x + s.numel()));
  std::vector<T> dt(m.size());
  divnorm_backward<T>(s, p, T(1), x, m.data(), dy, T(0), dt.data(), nullptr);
  const std::vector<T> box_dt = box_mean(s, p, dt);
  for (size_t e = 0; e < dt.size(); ++e) dx[e] = blend(alpha, dt[e] - box_dt[e], beta, dx[e]);
}

#define CREMA_LCN_INSTANTIATE(T)                                                                \
  template void divnorm_forward<T>(const LcnShape&, const LcnParams&, T, const T*, const T*, T, \
                                   T*);                                                         \
  template void divnorm_backward<T>(const LcnShape&, const LcnParams&, T, const T*, const T*,   \
                                    const T*, T, T*, T*);                                       \
  template void lcn_forward<T>(const LcnShape&, const LcnParams&, T, const T*, T, T*);          \
  template void lcn_backward<T>(const LcnShape&, const LcnParams&, T, const T*, const T*, T, T*);
CREMA_LCN_INSTANTIATE(float)
CREMA_LCN_INSTANTIATE(double)
#undef CREMA_LCN_INSTANTIATE

}  // namespace crema::kernels::ref
