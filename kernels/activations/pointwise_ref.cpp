// Pointwise activations, reference: the formulas of pointwise.h, one element at a time.
#include <cmath>

#include "kernels/activations/pointwise.h"

namespace crema::kernels::ref {
namespace {

// sqrt(2 / pi) and the cubic coefficient of the tanh form of GELU (Hendrycks & Gimpel 2016).
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// min(max(v, 0), 6), the piece hardsigmoid and hardswish share.
template <class T>
T relu6(T v) {
  return v < T(0) ? T(0) : (v > T(6) ? T(6) : v);
}

template <class T>
T forward(const Activation& a, T x) {
  switch (a.kind) {
    case ActivationKind::elu:
      return x > 0 ? x : T(a.alpha) * std::expm1(x);
    case ActivationKind::sigmoid:
      return sigmoid(x);
    case ActivationKind::tanh:
      return std::tanh(x);
    case ActivationKind::clip:
      return x < T(a.min) ? T(a.min) : (x > T(a.max) ? T(a.max) : x);
    case ActivationKind::swish:
      return x * sigmoid(T(a.beta) * x);
    case ActivationKind::gelu_erf:
      return x * T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
    case ActivationKind::gelu_tanh: {
      const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(u));
    }
    case ActivationKind::hardsigmoid:
      return relu6(x + T(3)) / T(6);
    case ActivationKind::hardswish:
      return x * relu6(x + T(3)) / T(6);
    case ActivationKind::mish:
      return x * std::tanh(std::log1p(std::exp(x)));
    case ActivationKind::softsign:
      return x / (T(1) + std::fabs(x));
  }
  return x;
}

// dx = dy * f'(x), from `saved`, which is y for elu, sigmoid and tanh, x for the others. Clip,
// hardsigmoid and hardswish select dy or 0 (as PyTorch's backward does), so an infinite dy where
// the derivative is 0 gives 0, not 0 * inf.
template <class T>
T backward(const Activation& a, T saved, T dy) {
  switch (a.kind) {
    case ActivationKind::elu: {
      const T y = saved;
      return y > 0 ? dy : dy * (y + T(a.alpha));
    }
    case ActivationKind::sigmoid: {
      const T y = saved;
      return dy * y * (T(1) - y);
    }
    case ActivationKind::tanh: {
      const T y = saved;
      return dy * (T(1) - y * y);
    }
    case ActivationKind::clip: {
      const T x = saved;
      return x >= T(a.min) && x <= T(a.max) ? dy : T(0);
    }
    case ActivationKind::swish: {
      const T x = saved, s = sigmoid(T(a.beta) * x);
      return dy * (s + T(a.beta) * x * s * (T(1) - s));
    }
    case ActivationKind::gelu_erf: {
      const T x = saved;
      const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
      const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      return dy * (cdf + x * pdf);
    }
    case ActivationKind::gelu_tanh: {
      const T x = saved;
      const T t = std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x));
      const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
    }
    case ActivationKind::hardsigmoid: {
      const T x = saved;
      return x > T(-3) && x < T(3) ? dy / T(6) : T(0);
    }
    case ActivationKind::hardswish: {
      const T x = saved;
      return x < T(-3) ? T(0) : (x < T(3) ? dy * (x / T(3) + T(0.5)) : dy);
    }
    case ActivationKind::mish: {
      const T x = saved, t = std::tanh(std::log1p(std::exp(x))), s = sigmoid(x);
      return dy * (t + x * s * (T(1) - t * t));
    }
    case ActivationKind::softsign: {
      const T d = T(1) + std::fabs(saved);
      return dy / (d * d);
    }
  }
  return dy;
}

}  // namespace

template <class T>
void activation_forward(const Activation& a, int64_t n, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = forward(a, x[i]);
}

template <class T>
void activation_backward(const Activation& a, int64_t n, const T* saved, const T* dy, T* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = backward(a, saved[i], dy[i]);
}

template void activation_forward<float>(const Activation&, int64_t, const float*, float*);
template void activation_forward<double>(const Activation&, int64_t, const double*, double*);
template void activation_backward<float>(const Activation&, int64_t, const float*, const float*,
                                         float*);
template void activation_backward<double>(const Activation&, int64_t, const double*, const double*,
                                          double*);

}  // namespace crema::kernels::ref
