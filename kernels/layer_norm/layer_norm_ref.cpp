// Layer normalization, reference: the formulas of layer_norm.h one position at a time, the sums in
// double.
#include <cmath>

#include "kernels/layer_norm/layer_norm.h"

namespace crema::kernels::ref {

template <class T>
void layer_norm_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* weight,
                        const T* bias, float eps, T* y, T* mean, T* rstd) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* xp = x + o * C * inner + i;  // x[o, c, i] = xp[c * inner]
      T* yp = y + o * C * inner + i;
      double sum = 0.0;
      for (int64_t c = 0; c < C; ++c) sum += double(xp[c * inner]);
      const double m = sum / double(C);
      double squares = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(xp[c * inner]) - m;
        squares += d * d;
      }
      const double r = 1.0 / std::sqrt(squares / double(C) + double(eps));
      for (int64_t c = 0; c < C; ++c) {
        const double xhat = (double(xp[c * inner]) - m) * r;
        const double w = weight != nullptr ? double(weight[c]) : 1.0;
        const double b = bias != nullptr ? double(bias[c]) : 0.0;
        yp[c * inner] = T(xhat * w + b);
      }
      mean[o * inner + i] = T(m);
      rstd[o * inner + i] = T(r);
    }
  }
}

template <class T>
void layer_norm_backward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* dy,
                         const T* weight, const T* mean, const T* rstd, T* dx, T* xhat) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;  // element (o, c, i) is base + c * inner
      const double m = double(mean[o * inner + i]), r = double(rstd[o * inner + i]);
      double sum_g = 0.0, sum_gx = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t e = base + c * inner;
        const double g = double(dy[e]) * (weight != nullptr ? double(weight[c]) : 1.0);
        sum_g += g;
        sum_gx += g * (double(x[e]) - m) * r;
      }
      const double mean_g = sum_g / double(C), mean_gx = sum_gx / double(C);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t e = base + c * inner;
        const double h = (double(x[e]) - m) * r;
        const double g = double(dy[e]) * (weight != nullptr ? double(weight[c]) : 1.0);
        if (xhat != nullptr) xhat[e] = T(h);
        dx[e] = T(r * (g - mean_g - h * mean_gx));
      }
    }
  }
}

template void layer_norm_forward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                        const float*, float, float*, float*, float*);
template void layer_norm_forward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                         const double*, float, double*, double*, double*);
template void layer_norm_backward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                         const float*, const float*, const float*, float*, float*);
template void layer_norm_backward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                          const double*, const double*, const double*, double*,
                                          double*);

}  // namespace crema::kernels::ref
