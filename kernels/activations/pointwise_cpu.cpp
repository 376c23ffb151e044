// Pointwise activations, fast CPU path: the reference's formulas as Eigen array expressions over
// chunks of kChunk elements, the chunks split over OpenMP threads for large arrays.
//
// Why Eigen: GCC calls glibc's scalar tanhf and erff once per element, and those are slow (about
// 25 ns each on the development machine); Eigen evaluates tanh, erf and exp with polynomial
// approximations on SIMD registers, within a few ulp, so TanH and GELU run 20-40x faster than the
// reference (README.md). The exceptions:
//   - sigmoid and swish: 1 / (1 + exp(-x)), not Eigen's logistic(), whose tail (exp(x) below
//     about -9) is off by up to 5e-5 relative;
//   - ELU: Eigen's expm1 and select() are not vectorized; a plain loop is (elu_forward below);
//   - GELU's tanh form: through (1 + tanh(u)) / 2 = sigmoid(2u), free of the cancellation of
//     1 + tanh(u) for negative x, where float loses every digit (and Eigen's tanh rounds to -1);
//   - clip, hardsigmoid, hardswish: compare-and-select loops, which GCC vectorizes (`omp simd`)
//     when nothing else in them is conditional (hence `&`, not `&&`, and loads outside the
//     select);
//   - mish: through one exp and no log or tanh (mish_terms below), the exps an Eigen expression
//     and the rest a plain loop, as ELU.
// Each chunk is an independent coefficient-wise expression, so y may alias x and dx may alias dy.
#include <Eigen/Core>
#include <algorithm>
#include <unsupported/Eigen/SpecialFunctions>

#include "kernels/activations/pointwise.h"

namespace crema::kernels::cpu {
namespace {

using Array = Eigen::Map<Eigen::ArrayXf>;
using ConstArray = Eigen::Map<const Eigen::ArrayXf>;

// Elements per task: 16 KB of floats, small enough for a scratch array on the stack.
constexpr int64_t kChunk = 4096;
// Below this many elements one thread is faster: a parallel region costs a few microseconds,
// about what 16K transcendental evaluations take.
constexpr int64_t kParallelElements = 1 << 14;

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// body(begin, count) for consecutive chunks of [0, n), on up to num_threads threads.
template <class Body>
void for_each_chunk(int64_t n, int num_threads, Body body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    body(begin, std::min(kChunk, n - begin));
  }
}

template <class Expr>
auto sigmoid(const Expr& x) {
  return (1.0f + (-x).exp()).inverse();
}

// ELU's alpha * expm1(x) for x <= 0, into y where x <= 0, given scratch = exp(min(x, 0)). Eigen's
// expm1 is not vectorized (it calls exp and log per element), nor is its select() in Eigen 3.4,
// so the exps are one Eigen expression and the selects a plain loop that GCC vectorizes:
// exp(x) - 1 loses at most two bits below -0.35, and above it the Taylor series to x^8 is exact
// to float precision (its remainder is below 3e-10).
void elu_forward(int64_t m, float alpha, const float* x, const float* scratch, float* y) {
  // 1/8!, 1/7!, ..., 1/1!: expm1(v) = v * (1 + v/2! + v^2/3! + ...), evaluated by Horner.
  constexpr float kTaylor[8] = {1.0f / 40320, 1.0f / 5040, 1.0f / 720, 1.0f / 120,
                                1.0f / 24,    1.0f / 6,    1.0f / 2,   1.0f};
#pragma omp simd
  for (int64_t i = 0; i < m; ++i) {
    const float v = x[i];
    float series = kTaylor[0];
    for (int k = 1; k < 8; ++k) series = series * v + kTaylor[k];
    const float exp_minus_one = scratch[i] - 1.0f;  // read unconditionally: no branch
    const float expm1 = v > -0.35f ? v * series : exp_minus_one;
    y[i] = v > 0.0f ? v : alpha * expm1;
  }
}

// Mish's pieces from e = exp(min(x, 20)): with n = e (e + 2), tanh(softplus(x)) = ((1 + e)^2 - 1)
// / ((1 + e)^2 + 1) = n / (n + 2), 1 - tanh^2 = 4 (n + 1) / (n + 2)^2 and sigmoid(x) = e / (1 + e),
// each free of cancellation. Above 20, tanh(softplus(x)) rounds to 1 in float (and in double):
// exp is clamped there so that n^2 stays finite, and the derivative is 1 (mish_backward).
constexpr float kMishLinear = 20.0f;

void mish_forward(int64_t m, const float* x, const float* e, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < m; ++i) {
    const float n = e[i] * (e[i] + 2.0f);
    y[i] = x[i] * n / (n + 2.0f);
  }
}

void mish_backward(int64_t m, const float* x, const float* e, const float* dy, float* dx) {
#pragma omp simd
  for (int64_t i = 0; i < m; ++i) {
    const float n = e[i] * (e[i] + 2.0f), d = n + 2.0f, g = dy[i];
    const float slope = n / d + x[i] * e[i] / (1.0f + e[i]) * 4.0f * (n + 1.0f) / (d * d);
    dx[i] = x[i] > kMishLinear ? g : g * slope;
  }
}

// min(max(v, 0), 6) as selects, the piece hardsigmoid and hardswish share.
inline float relu6(float v) {
  return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
}

void forward_chunk(const Activation& a, int64_t m, const float* xp, float* yp) {
  const ConstArray x(xp, m);
  Array y(yp, m);
  float scratch_data[kChunk];
  Array scratch(scratch_data, m);
  switch (a.kind) {
    case ActivationKind::elu:
      scratch = x.min(0.0f).exp();
      elu_forward(m, a.alpha, xp, scratch_data, yp);
      return;
    case ActivationKind::sigmoid:
      y = sigmoid(x);
      return;
    case ActivationKind::tanh:
      y = x.tanh();
      return;
    case ActivationKind::clip: {
      const float lo = a.min, hi = a.max;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) yp[i] = xp[i] < lo ? lo : (xp[i] > hi ? hi : xp[i]);
      return;
    }
    case ActivationKind::swish:
      y = x * sigmoid(a.beta * x);
      return;
    case ActivationKind::gelu_erf:
      y = 0.5f * x * (1.0f + (kSqrtHalf * x).erf());
      return;
    case ActivationKind::gelu_tanh:  // (1 + tanh(u)) / 2 = sigmoid(2u)
      y = x * sigmoid(2.0f * kSqrt2OverPi * (x + kGeluCubic * x.cube()));
      return;
    case ActivationKind::hardsigmoid:
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) yp[i] = relu6(xp[i] + 3.0f) / 6.0f;
      return;
    case ActivationKind::hardswish:
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) yp[i] = xp[i] * relu6(xp[i] + 3.0f) / 6.0f;
      return;
    case ActivationKind::mish:
      scratch = x.min(kMishLinear).exp();
      mish_forward(m, xp, scratch_data, yp);
      return;
    case ActivationKind::softsign:
      y = x / (1.0f + x.abs());
      return;
  }
}

// `saved` is y for elu, sigmoid and tanh, x for the others (pointwise.h). Where a subexpression
// is used several times it is evaluated once into `scratch`.
void backward_chunk(const Activation& a, int64_t m, const float* sp, const float* dyp, float* dxp) {
  const ConstArray saved(sp, m), dy(dyp, m);
  Array dx(dxp, m);
  float scratch_data[kChunk];
  Array scratch(scratch_data, m);
  switch (a.kind) {
    case ActivationKind::elu:
      dx = (saved > 0.0f).select(dy, dy * (saved + a.alpha));
      return;
    case ActivationKind::sigmoid:
      dx = dy * saved * (1.0f - saved);
      return;
    case ActivationKind::tanh:
      dx = dy * (1.0f - saved.square());
      return;
    case ActivationKind::clip: {
      const float lo = a.min, hi = a.max;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) {
        const float g = dyp[i];  // read outside the select: a conditional load keeps a branch
        dxp[i] = ((sp[i] >= lo) & (sp[i] <= hi)) ? g : 0.0f;
      }
      return;
    }
    case ActivationKind::swish:
      scratch = sigmoid(a.beta * saved);
      dx = dy * (scratch + a.beta * saved * scratch * (1.0f - scratch));
      return;
    case ActivationKind::gelu_erf:
      dx = dy * (0.5f * (1.0f + (kSqrtHalf * saved).erf()) +
                 saved * kInvSqrt2Pi * (-0.5f * saved.square()).exp());
      return;
    case ActivationKind::gelu_tanh:  // s = sigmoid(2u): (1 + t) / 2 = s, 1 - t^2 = 4 s (1 - s)
      scratch = sigmoid(2.0f * kSqrt2OverPi * (saved + kGeluCubic * saved.cube()));
      dx = dy * (scratch + 2.0f * saved * scratch * (1.0f - scratch) * kSqrt2OverPi *
                               (1.0f + 3.0f * kGeluCubic * saved.square()));
      return;
    case ActivationKind::hardsigmoid:
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) {
        const float g = dyp[i] / 6.0f;
        dxp[i] = ((sp[i] > -3.0f) & (sp[i] < 3.0f)) ? g : 0.0f;
      }
      return;
    case ActivationKind::hardswish:
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) {
        const float x = sp[i], g = dyp[i], inner = g * (x / 3.0f + 0.5f);
        dxp[i] = x < -3.0f ? 0.0f : (x < 3.0f ? inner : g);
      }
      return;
    case ActivationKind::mish:
      scratch = saved.min(kMishLinear).exp();
      mish_backward(m, sp, scratch_data, dyp, dxp);
      return;
    case ActivationKind::softsign:
      dx = dy / (1.0f + saved.abs()).square();
      return;
  }
}

}  // namespace

void activation_forward(const Activation& a, int64_t n, const float* x, float* y, int num_threads) {
  for_each_chunk(n, num_threads,
                 [&](int64_t begin, int64_t m) { forward_chunk(a, m, x + begin, y + begin); });
}

void activation_backward(const Activation& a, int64_t n, const float* saved, const float* dy,
                         float* dx, int num_threads) {
  for_each_chunk(n, num_threads, [&](int64_t begin, int64_t m) {
    backward_chunk(a, m, saved + begin, dy + begin, dx + begin);
  });
}

}  // namespace crema::kernels::cpu
