// Pointwise activations, CUDA versions: elementwise maps (kernels/common/map_cuda.cuh), one
// functor per activation and direction, picked by a switch on the host.
//   PointwiseVersion::scalar      one element per thread and iteration of a grid-stride loop.
//   PointwiseVersion::vectorized  16 bytes per thread and access (4 floats, 8 bf16 or f16).
// Each is a template on the storage type T (float, bf16_t, f16_t): the functors compute in float,
// the map widens the inputs and rounds the output once.
// The functors use CUDA's full-precision expf, expm1f, tanhf and erff (within 2 ulp), not the
// __expf-style intrinsics, so the results agree with the double reference to about 1e-7. GELU's
// tanh form goes through sigmoid(2u), as on the CPU (pointwise_cpu.cpp says why).
// y may alias x, dx may alias dy.
#include "kernels/activations/pointwise.h"
#include "kernels/common/map_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

__device__ inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

struct EluForward {
  float alpha;
  __device__ float operator()(float x) const { return x > 0.0f ? x : alpha * expm1f(x); }
};
struct EluBackward {  // from y
  float alpha;
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : dy * (y + alpha); }
};

struct SigmoidForward {
  __device__ float operator()(float x) const { return sigmoid(x); }
};
struct SigmoidBackward {  // from y
  __device__ float operator()(float y, float dy) const { return dy * y * (1.0f - y); }
};

struct TanhForward {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhBackward {  // from y
  __device__ float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

struct ClipForward {
  float lo, hi;
  __device__ float operator()(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
};
struct ClipBackward {  // from x; inclusive ends, a select (PyTorch's clamp)
  float lo, hi;
  __device__ float operator()(float x, float dy) const { return x >= lo && x <= hi ? dy : 0.0f; }
};

struct SwishForward {
  float beta;
  __device__ float operator()(float x) const { return x * sigmoid(beta * x); }
};
struct SwishBackward {  // from x
  float beta;
  __device__ float operator()(float x, float dy) const {
    const float s = sigmoid(beta * x);
    return dy * (s + beta * x * s * (1.0f - s));
  }
};

struct GeluErfForward {
  __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(kSqrtHalf * x)); }
};
struct GeluErfBackward {  // from x
  __device__ float operator()(float x, float dy) const {
    const float cdf = 0.5f * (1.0f + erff(kSqrtHalf * x));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};

// Through s = sigmoid(2u) = (1 + tanh(u)) / 2, with 1 - tanh(u)^2 = 4 s (1 - s): no cancellation
// for negative x, where 1 + tanhf(u) loses every digit.
struct GeluTanhForward {
  __device__ float operator()(float x) const {
    return x * sigmoid(2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  }
};
struct GeluTanhBackward {  // from x
  __device__ float operator()(float x, float dy) const {
    const float s = sigmoid(2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return dy * (s + 2.0f * x * s * (1.0f - s) * du);
  }
};

__device__ inline float relu6(float v) {
  return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
}

struct HardsigmoidForward {
  __device__ float operator()(float x) const { return relu6(x + 3.0f) / 6.0f; }
};
struct HardsigmoidBackward {  // from x; 0 at the kinks, as PyTorch
  __device__ float operator()(float x, float dy) const {
    return x > -3.0f && x < 3.0f ? dy / 6.0f : 0.0f;
  }
};

struct HardswishForward {
  __device__ float operator()(float x) const { return x * relu6(x + 3.0f) / 6.0f; }
};
struct HardswishBackward {  // from x; at the kinks as PyTorch: -3 inner, 3 outer
  __device__ float operator()(float x, float dy) const {
    return x < -3.0f ? 0.0f : (x < 3.0f ? dy * (x / 3.0f + 0.5f) : dy);
  }
};

// Mish through one expf, as on the CPU (pointwise_cpu.cpp derives it): e = exp(min(x, 20)),
// n = e (e + 2), tanh(softplus(x)) = n / (n + 2); the derivative is 1 above 20.
struct MishForward {
  __device__ float operator()(float x) const {
    const float e = expf(fminf(x, 20.0f)), n = e * (e + 2.0f);
    return x * n / (n + 2.0f);
  }
};
struct MishBackward {  // from x
  __device__ float operator()(float x, float dy) const {
    const float e = expf(fminf(x, 20.0f)), n = e * (e + 2.0f), d = n + 2.0f;
    const float slope = n / d + x * e / (1.0f + e) * 4.0f * (n + 1.0f) / (d * d);
    return x > 20.0f ? dy : dy * slope;
  }
};

struct SoftsignForward {
  __device__ float operator()(float x) const { return x / (1.0f + fabsf(x)); }
};
struct SoftsignBackward {  // from x: 1 / (1 + |x|)^2
  __device__ float operator()(float x, float dy) const {
    const float d = 1.0f + fabsf(x);
    return dy / (d * d);
  }
};

}  // namespace

template <class T>
void activation_forward(const Activation& a, int64_t n, const T* x, T* y, PointwiseVersion version,
                        gpu::Stream stream) {
  const bool vec = version == PointwiseVersion::vectorized;
  const char* what = "activation_forward";
  switch (a.kind) {
    case ActivationKind::elu:
      return detail::launch_map<1>(n, x, nullptr, y, EluForward{a.alpha}, vec, stream, what);
    case ActivationKind::sigmoid:
      return detail::launch_map<1>(n, x, nullptr, y, SigmoidForward{}, vec, stream, what);
    case ActivationKind::tanh:
      return detail::launch_map<1>(n, x, nullptr, y, TanhForward{}, vec, stream, what);
    case ActivationKind::clip:
      return detail::launch_map<1>(n, x, nullptr, y, ClipForward{a.min, a.max}, vec, stream, what);
    case ActivationKind::swish:
      return detail::launch_map<1>(n, x, nullptr, y, SwishForward{a.beta}, vec, stream, what);
    case ActivationKind::gelu_erf:
      return detail::launch_map<1>(n, x, nullptr, y, GeluErfForward{}, vec, stream, what);
    case ActivationKind::gelu_tanh:
      return detail::launch_map<1>(n, x, nullptr, y, GeluTanhForward{}, vec, stream, what);
    case ActivationKind::hardsigmoid:
      return detail::launch_map<1>(n, x, nullptr, y, HardsigmoidForward{}, vec, stream, what);
    case ActivationKind::hardswish:
      return detail::launch_map<1>(n, x, nullptr, y, HardswishForward{}, vec, stream, what);
    case ActivationKind::mish:
      return detail::launch_map<1>(n, x, nullptr, y, MishForward{}, vec, stream, what);
    case ActivationKind::softsign:
      return detail::launch_map<1>(n, x, nullptr, y, SoftsignForward{}, vec, stream, what);
  }
}

template <class T>
void activation_backward(const Activation& a, int64_t n, const T* saved, const T* dy, T* dx,
                         PointwiseVersion version, gpu::Stream stream) {
  const bool vec = version == PointwiseVersion::vectorized;
  const char* what = "activation_backward";
  switch (a.kind) {
    case ActivationKind::elu:
      return detail::launch_map<2>(n, saved, dy, dx, EluBackward{a.alpha}, vec, stream, what);
    case ActivationKind::sigmoid:
      return detail::launch_map<2>(n, saved, dy, dx, SigmoidBackward{}, vec, stream, what);
    case ActivationKind::tanh:
      return detail::launch_map<2>(n, saved, dy, dx, TanhBackward{}, vec, stream, what);
    case ActivationKind::clip:
      return detail::launch_map<2>(n, saved, dy, dx, ClipBackward{a.min, a.max}, vec, stream, what);
    case ActivationKind::swish:
      return detail::launch_map<2>(n, saved, dy, dx, SwishBackward{a.beta}, vec, stream, what);
    case ActivationKind::gelu_erf:
      return detail::launch_map<2>(n, saved, dy, dx, GeluErfBackward{}, vec, stream, what);
    case ActivationKind::gelu_tanh:
      return detail::launch_map<2>(n, saved, dy, dx, GeluTanhBackward{}, vec, stream, what);
    case ActivationKind::hardsigmoid:
      return detail::launch_map<2>(n, saved, dy, dx, HardsigmoidBackward{}, vec, stream, what);
    case ActivationKind::hardswish:
      return detail::launch_map<2>(n, saved, dy, dx, HardswishBackward{}, vec, stream, what);
    case ActivationKind::mish:
      return detail::launch_map<2>(n, saved, dy, dx, MishBackward{}, vec, stream, what);
    case ActivationKind::softsign:
      return detail::launch_map<2>(n, saved, dy, dx, SoftsignBackward{}, vec, stream, what);
  }
}

#define CREMA_POINTWISE_INSTANTIATE(T)                                                            \
  template void activation_forward<T>(const Activation&, int64_t, const T*, T*, PointwiseVersion, \
                                      gpu::Stream);                                               \
  template void activation_backward<T>(const Activation&, int64_t, const T*, const T*, T*,        \
                                       PointwiseVersion, gpu::Stream);
CREMA_POINTWISE_INSTANTIATE(float)
CREMA_POINTWISE_INSTANTIATE(bf16_t)
CREMA_POINTWISE_INSTANTIATE(f16_t)
#undef CREMA_POINTWISE_INSTANTIATE

}  // namespace crema::kernels::cuda
