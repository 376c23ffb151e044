// Batch normalization, reference: the formulas of batch_norm.h, one channel at a time, the sums
// in double. x[n, c, s] sits at (n * C + c) * S + s. The fused forms of batch_norm_relu.h are
// these functions followed (forward) or preceded (backward) by the add and the ReLU.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/batch_norm_relu.h"

namespace crema::kernels::ref {
namespace {

int64_t at(const BatchNormShape& s, int64_t n, int64_t c, int64_t i) {
  return (n * s.C + c) * s.S + i;
}

// y = gamma * (x - mean) * invstd + beta over channel c.
template <class T>
void normalize_channel(const BatchNormShape& s, int64_t c, const T* x, const T* gamma,
                       const T* beta, T mean, T invstd, T* y) {
  const T g = gamma ? gamma[c] : T(1), b = beta ? beta[c] : T(0);
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t i = 0; i < s.S; ++i) {
      const int64_t j = at(s, n, c, i);
      y[j] = g * (x[j] - mean) * invstd + b;
    }
  }
}

// The ReLU's input: the Eltwise SUM's (0 + z) + r, or z alone.
template <class T>
T relu_input(T z, const T* r, int64_t j) {
  return r ? (T(0) + z) + r[j] : z;
}

// y = relu(y + r) in place, as the ReLU layer rounds it: v > 0 ? v : 0 * v.
template <class T>
void add_relu(int64_t count, const T* r, T* y) {
  for (int64_t j = 0; j < count; ++j) {
    const T v = relu_input(y[j], r, j);
    y[j] = v > T(0) ? v : T(0) * v;
  }
}

}  // namespace

template <class T>
void batch_norm_forward_training(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                                 T eps, T momentum, T* y, T* save_mean, T* save_invstd,
                                 T* running_mean, T* running_var, T* num_batches_tracked) {
  const double M = double(s.N * s.S);
  for (int64_t c = 0; c < s.C; ++c) {
    double sum = 0.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) sum += double(x[at(s, n, c, i)]);
    }
    const double mean = sum / M;
    double squares = 0.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const double d = double(x[at(s, n, c, i)]) - mean;
        squares += d * d;
      }
    }
    const double var = squares / M;
    const T invstd = T(1.0 / std::sqrt(var + double(eps)));
    save_mean[c] = T(mean);
    save_invstd[c] = invstd;
    if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * T(mean);
    if (running_var) {
      running_var[c] = (T(1) - momentum) * running_var[c] + momentum * T(squares / (M - 1.0));
    }
    normalize_channel(s, c, x, gamma, beta, T(mean), invstd, y);
  }
  if (num_batches_tracked) *num_batches_tracked += T(1);
}

template <class T>
void batch_norm_forward_inference(const BatchNormShape& s, const T* x, const T* gamma,
                                  const T* beta, const T* running_mean, const T* running_var, T eps,
                                  T* y, T* save_mean, T* save_invstd) {
  for (int64_t c = 0; c < s.C; ++c) {
    const T invstd = T(1) / std::sqrt(running_var[c] + eps);
    save_mean[c] = running_mean[c];
    save_invstd[c] = invstd;
    normalize_channel(s, c, x, gamma, beta, running_mean[c], invstd, y);
  }
}

template <class T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, bool batch_stats, T* dx,
                         T* dgamma, T* dbeta) {
  const double M = double(s.N * s.S);
  for (int64_t c = 0; c < s.C; ++c) {
    const double mean = double(save_mean[c]), invstd = double(save_invstd[c]);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const int64_t j = at(s, n, c, i);
        sum_dy += double(dy[j]);
        sum_dy_xhat += double(dy[j]) * (double(x[j]) - mean) * invstd;
      }
    }
    if (dgamma) dgamma[c] += T(sum_dy_xhat);
    if (dbeta) dbeta[c] += T(sum_dy);
    if (!dx) continue;
    const double g = gamma ? double(gamma[c]) : 1.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const int64_t j = at(s, n, c, i);
        double d = double(dy[j]);
        if (batch_stats) {
          const double xhat = (double(x[j]) - mean) * invstd;
          d -= sum_dy / M + xhat * sum_dy_xhat / M;
        }
        dx[j] = T(g * invstd * d);
      }
    }
  }
}

template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const T* gamma, const T* beta, T eps, T momentum, T* y,
                                      T* x_copy, T* save_mean, T* save_invstd, T* running_mean,
                                      T* running_var, T* num_batches_tracked) {
  const int64_t count = s.N * s.C * s.S;
  if (x_copy) std::copy(x, x + count, x_copy);
  batch_norm_forward_training(s, x, gamma, beta, eps, momentum, y, save_mean, save_invstd,
                              running_mean, running_var, num_batches_tracked);
  add_relu(count, r, y);
}

template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const T* gamma, const T* beta, const T* running_mean,
                                       const T* running_var, T eps, T* y, T* x_copy, T* save_mean,
                                       T* save_invstd) {
  const int64_t count = s.N * s.C * s.S;
  if (x_copy) std::copy(x, x + count, x_copy);
  batch_norm_forward_inference(s, x, gamma, beta, running_mean, running_var, eps, y, save_mean,
                               save_invstd);
  add_relu(count, r, y);
}

// dv = dy where the ReLU's output y is positive (where its input is: batch_norm_relu.h), or,
// without y, where z recomputed as the forward rounded it is; then the batch norm's backward with
// dv.
template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const T* gamma, const T* beta, const T* save_mean,
                              const T* save_invstd, bool batch_stats, T* dx, T* dr, T* dgamma,
                              T* dbeta) {
  std::vector<T> z(size_t(s.N * s.C * s.S));
  if (!y) {
    for (int64_t c = 0; c < s.C; ++c) {
      normalize_channel(s, c, x, gamma, beta, save_mean[c], save_invstd[c], z.data());
    }
  }
  std::vector<T> dv(z.size());
  for (size_t j = 0; j < z.size(); ++j) {
    dv[j] = (y ? y[j] : z[j]) > T(0) ? dy[j] : T(0) * dy[j];
  }
  if (dr) std::copy(dv.begin(), dv.end(), dr);
  batch_norm_backward(s, x, dv.data(), gamma, save_mean, save_invstd, batch_stats, dx, dgamma,
                      dbeta);
}

#define CREMA_INSTANTIATE(T)                                                                      \
  template void batch_norm_forward_training<T>(const BatchNormShape&, const T*, const T*,         \
                                               const T*, T, T, T*, T*, T*, T*, T*, T*);           \
  template void batch_norm_forward_inference<T>(const BatchNormShape&, const T*, const T*,        \
                                                const T*, const T*, const T*, T, T*, T*, T*);     \
  template void batch_norm_backward<T>(const BatchNormShape&, const T*, const T*, const T*,       \
                                       const T*, const T*, bool, T*, T*, T*);                     \
  template void batch_norm_relu_forward_training<T>(const BatchNormShape&, const T*, const T*,    \
                                                    const T*, const T*, T, T, T*, T*, T*, T*, T*, \
                                                    T*, T*);                                      \
  template void batch_norm_relu_forward_inference<T>(const BatchNormShape&, const T*, const T*,   \
                                                     const T*, const T*, const T*, const T*, T,   \
                                                     T*, T*, T*, T*);                             \
  template void batch_norm_relu_backward<T>(const BatchNormShape&, const T*, const T*, const T*,  \
                                            const T*, const T*, const T*, const T*, bool, T*, T*, \
                                            T*, T*);
CREMA_INSTANTIATE(float)
CREMA_INSTANTIATE(double)
#undef CREMA_INSTANTIATE

}  // namespace crema::kernels::ref
