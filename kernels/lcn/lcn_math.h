// What the CPU loops and the CUDA kernels of lcn.h compute per element (CREMA_HOST_DEVICE), in
// double over the window clamped to the image: the window sums, d, and the two backward passes.
// Element e is (plane, h, w) with plane = n * C + c.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/lcn/lcn.h"

namespace crema::kernels::detail {

struct LcnElement {
  int64_t base;  // offset of the plane's first element
  int64_t h, w;
};

CREMA_HOST_DEVICE inline LcnElement lcn_element(const LcnShape& s, int64_t e) {
  return {e - e % (s.H * s.W), (e / s.W) % s.H, e % s.W};
}

// sum over the window of e of v (or of (v - m)^2 when `centred_squares`), clamped to the image.
CREMA_HOST_DEVICE inline double lcn_window_sum(const LcnShape& s, int half, const float* v,
                                               const float* m, bool centred_squares,
                                               LcnElement at) {
  const int64_t h0 = at.h - half < 0 ? 0 : at.h - half;
  const int64_t h1 = at.h + half >= s.H ? s.H - 1 : at.h + half;
  const int64_t w0 = at.w - half < 0 ? 0 : at.w - half;
  const int64_t w1 = at.w + half >= s.W ? s.W - 1 : at.w + half;
  double sum = 0;
  for (int64_t i = h0; i <= h1; ++i) {
    for (int64_t j = w0; j <= w1; ++j) {
      const int64_t q = at.base + i * s.W + j;
      const double t = double(v[q]) - (m ? double(m[q]) : 0.0);
      sum += centred_squares ? t * t : double(v[q]);
    }
  }
  return sum;
}

CREMA_HOST_DEVICE inline double lcn_area(const LcnParams& p) {
  return double(p.local_size) * double(p.local_size);
}

// box(v)[e] = window sum / n^2.
CREMA_HOST_DEVICE inline float lcn_box_mean(const LcnShape& s, const LcnParams& p, const float* v,
                                            int64_t e) {
  return float(lcn_window_sum(s, p.local_size / 2, v, nullptr, false, lcn_element(s, e)) /
               lcn_area(p));
}

// d[e] = k + alpha_n / n^2 * sum_window (x - m)^2.
CREMA_HOST_DEVICE inline double lcn_denominator(const LcnShape& s, const LcnParams& p,
                                                const float* x, const float* m, int64_t e) {
  return p.k +
         p.alpha / lcn_area(p) * lcn_window_sum(s, p.local_size / 2, x, m, true, lcn_element(s, e));
}

CREMA_HOST_DEVICE inline double lcn_centred(const float* x, const float* m, int64_t e) {
  return double(x[e]) - (m ? double(m[e]) : 0.0);
}

// y = alpha * value + beta * y, y not read when beta is 0.
CREMA_HOST_DEVICE inline float lcn_blend(float alpha, double value, float beta, float out) {
  return beta == 0.0f ? float(alpha * value) : float(alpha * value + double(beta) * out);
}

// The forward's value at e: t[e] d[e]^-beta_n.
CREMA_HOST_DEVICE inline double divnorm_at(const LcnShape& s, const LcnParams& p, const float* x,
                                           const float* m, int64_t e) {
  return lcn_centred(x, m, e) * pow(lcn_denominator(s, p, x, m, e), -p.beta);
}

// Backward pass 1 at e: inv[e] = d^-beta_n, u[e] = g t d^(-beta_n - 1).
CREMA_HOST_DEVICE inline void divnorm_backward_prepare(const LcnShape& s, const LcnParams& p,
                                                       const float* x, const float* m,
                                                       const float* dy, float* inv, float* u,
                                                       int64_t e) {
  const double d = lcn_denominator(s, p, x, m, e), d_inv = pow(d, -p.beta);
  inv[e] = float(d_inv);
  u[e] = float(double(dy[e]) * lcn_centred(x, m, e) * d_inv / d);
}

// Backward pass 2 at e: dt[e] = g inv - (2 alpha_n beta_n / n^2) t sum_window u.
CREMA_HOST_DEVICE inline double divnorm_backward_dt(const LcnShape& s, const LcnParams& p,
                                                    const float* x, const float* m, const float* dy,
                                                    const float* inv, const float* u, int64_t e) {
  const double sum = lcn_window_sum(s, p.local_size / 2, u, nullptr, false, lcn_element(s, e));
  return double(dy[e]) * inv[e] - 2.0 * p.alpha * p.beta / lcn_area(p) * lcn_centred(x, m, e) * sum;
}

}  // namespace crema::kernels::detail
