// Synchronized batch normalization, reference (and the CPU's path): the formulas of
// sync_batch_norm.h, one channel at a time, the sums in double. x[n, c, s] sits at
// (n * C + c) * S + s.
#include <algorithm>
#include <cmath>

#include "kernels/batch_norm/sync_batch_norm.h"

namespace crema::kernels::ref {
namespace {

int64_t at(const BatchNormShape& s, int64_t n, int64_t c, int64_t i) {
  return (n * s.C + c) * s.S + i;
}

// sums[c] += f(j), sums[C + c] += g(j) over channel c's values j, in (n, s) order; sums[2C] = M.
template <class First, class Second>
void per_channel(const BatchNormShape& s, double* sums, const First& first, const Second& second) {
  for (int64_t c = 0; c < s.C; ++c) {
    double a = 0.0, b = 0.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const int64_t j = at(s, n, c, i);
        a += first(c, j);
        b += second(c, j);
      }
    }
    sums[c] = a;
    sums[s.C + c] = b;
  }
  sums[2 * s.C] = double(s.N * s.S);
}

}  // namespace

template <class T>
void batch_norm_channel_sums(const BatchNormShape& s, const T* x, double* sums) {
  per_channel(
      s, sums, [&](int64_t, int64_t j) { return double(x[j]); },
      [&](int64_t, int64_t j) { return double(x[j]) * double(x[j]); });
}

template <class T>
void batch_norm_gradient_sums(const BatchNormShape& s, const T* x, const T* dy, const T* mean,
                              const T* invstd, double* sums) {
  per_channel(
      s, sums, [&](int64_t, int64_t j) { return double(dy[j]); },
      [&](int64_t c, int64_t j) {
        return double(dy[j]) * ((double(x[j]) - double(mean[c])) * double(invstd[c]));
      });
}

template <class T>
void batch_norm_statistics(int64_t C, const double* sums, T momentum, T* mean, T* var,
                           T* running_mean, T* running_var, T* num_batches_tracked) {
  const double M = sums[2 * C];
  for (int64_t c = 0; c < C; ++c) {
    const double m = sums[c] / M;
    const double squares = std::max(0.0, sums[C + c] - sums[c] * m);  // sum (x - mean)^2
    mean[c] = T(m);
    var[c] = T(squares / M);
    if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * T(m);
    if (running_var) {
      running_var[c] = (T(1) - momentum) * running_var[c] + momentum * T(squares / (M - 1.0));
    }
  }
  if (num_batches_tracked) *num_batches_tracked += T(1);
}

template <class T>
void sync_batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma,
                              const T* mean, const T* invstd, const double* local,
                              const double* global, T* dx, T* dgamma, T* dbeta) {
  const double M = global[2 * s.C];
  for (int64_t c = 0; c < s.C; ++c) {
    if (dbeta) dbeta[c] += T(local[c]);
    if (dgamma) dgamma[c] += T(local[s.C + c]);
    if (!dx) continue;
    const double k = (gamma ? double(gamma[c]) : 1.0) * double(invstd[c]);
    const double mean_dy = global[c] / M, mean_dy_xhat = global[s.C + c] / M;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const int64_t j = at(s, n, c, i);
        const double xhat = (double(x[j]) - double(mean[c])) * double(invstd[c]);
        dx[j] = T(k * (double(dy[j]) - mean_dy - xhat * mean_dy_xhat));
      }
    }
  }
}

#define CREMA_INSTANTIATE(T)                                                                      \
  template void batch_norm_channel_sums<T>(const BatchNormShape&, const T*, double*);             \
  template void batch_norm_gradient_sums<T>(const BatchNormShape&, const T*, const T*, const T*,  \
                                            const T*, double*);                                   \
  template void batch_norm_statistics<T>(int64_t, const double*, T, T*, T*, T*, T*, T*);          \
  template void sync_batch_norm_backward<T>(const BatchNormShape&, const T*, const T*, const T*,  \
                                            const T*, const T*, const double*, const double*, T*, \
                                            T*, T*);
CREMA_INSTANTIATE(float)
CREMA_INSTANTIATE(double)
#undef CREMA_INSTANTIATE

}  // namespace crema::kernels::ref
