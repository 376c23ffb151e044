// Optimizer updates, reference: each rule of optimizers.h as its formulas, one element at a time,
// in T arithmetic (double in the tests: the oracle of the float paths).
#include <cmath>

#include "kernels/optimizers/optimizers.h"

namespace crema::kernels::ref {

template <class T>
void sgd_update(int64_t n, T* w, const T* g, T* v, T lr, T momentum, T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    v[i] = momentum * v[i] + lr * (g[i] + weight_decay * w[i]);
    w[i] -= v[i];
  }
}

template <class T>
void nesterov_update(int64_t n, T* w, const T* g, T* b, T lr, T momentum, T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    const T d = g[i] + weight_decay * w[i];
    b[i] = momentum * b[i] + d;
    w[i] -= lr * (d + momentum * b[i]);
  }
}

template <class T>
void adam_update(int64_t n, T* w, const T* g, T* exp_avg, T* exp_avg_sq, T lr, T beta1, T beta2,
                 T eps, T weight_decay, bool decoupled, int64_t step) {
  const T bias_correction1 = 1 - std::pow(beta1, T(step));
  const T bias_correction2 = 1 - std::pow(beta2, T(step));
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if (decoupled) {
      w[i] *= 1 - lr * weight_decay;
    } else {
      d += weight_decay * w[i];
    }
    exp_avg[i] = beta1 * exp_avg[i] + (1 - beta1) * d;
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1 - beta2) * d * d;
    const T denominator = std::sqrt(exp_avg_sq[i]) / std::sqrt(bias_correction2) + eps;
    w[i] -= lr / bias_correction1 * exp_avg[i] / denominator;
  }
}

template <class T>
void rmsprop_update(int64_t n, T* w, const T* g, T* square_avg, T* momentum_buffer, T* grad_avg,
                    T lr, T alpha, T eps, T momentum, bool centered, T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    const T d = g[i] + weight_decay * w[i];
    square_avg[i] = alpha * square_avg[i] + (1 - alpha) * d * d;
    T avg = square_avg[i];
    if (centered) {
      grad_avg[i] = alpha * grad_avg[i] + (1 - alpha) * d;
      avg -= grad_avg[i] * grad_avg[i];
    }
    avg = std::sqrt(avg) + eps;
    if (momentum > 0) {
      momentum_buffer[i] = momentum * momentum_buffer[i] + d / avg;
      w[i] -= lr * momentum_buffer[i];
    } else {
      w[i] -= lr * d / avg;
    }
  }
}

template <class T>
void adagrad_update(int64_t n, T* w, const T* g, T* sum, T lr, T lr_decay, T eps, T weight_decay,
                    int64_t step) {
  const T decayed_lr = lr / (1 + T(step - 1) * lr_decay);
  for (int64_t i = 0; i < n; ++i) {
    const T d = g[i] + weight_decay * w[i];
    sum[i] += d * d;
    w[i] -= decayed_lr * d / (std::sqrt(sum[i]) + eps);
  }
}

template <class T>
T gradient_scale(T sum_of_squares, T multiplier, T max_norm) {
  if (!(max_norm > 0)) return multiplier;
  const T coefficient = max_norm / (std::sqrt(sum_of_squares) * multiplier + T(1e-6));
  return multiplier * (coefficient > 1 ? T(1) : coefficient);
}

template void sgd_update<float>(int64_t, float*, const float*, float*, float, float, float);
template void nesterov_update<float>(int64_t, float*, const float*, float*, float, float, float);
template void adam_update<float>(int64_t, float*, const float*, float*, float*, float, float, float,
                                 float, float, bool, int64_t);
template void rmsprop_update<float>(int64_t, float*, const float*, float*, float*, float*, float,
                                    float, float, float, bool, float);
template void adagrad_update<float>(int64_t, float*, const float*, float*, float, float, float,
                                    float, int64_t);
template float gradient_scale<float>(float, float, float);
template void sgd_update<double>(int64_t, double*, const double*, double*, double, double, double);
template void nesterov_update<double>(int64_t, double*, const double*, double*, double, double,
                                      double);
template void adam_update<double>(int64_t, double*, const double*, double*, double*, double, double,
                                  double, double, double, bool, int64_t);
template void rmsprop_update<double>(int64_t, double*, const double*, double*, double*, double*,
                                     double, double, double, double, bool, double);
template void adagrad_update<double>(int64_t, double*, const double*, double*, double, double,
                                     double, double, int64_t);
template double gradient_scale<double>(double, double, double);

}  // namespace crema::kernels::ref
