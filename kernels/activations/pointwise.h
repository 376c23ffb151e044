// Pointwise activations with no learned parameter, elementwise on tensors of any shape.
//
//   kind        forward y = f(x)                                backward dx = dy * f'(x), from
//   elu         x > 0 ? x : alpha * (exp(x) - 1)                y:  y > 0 ? 1 : y + alpha
//   sigmoid     s(x) = 1 / (1 + exp(-x))                        y:  y * (1 - y)
//   tanh        tanh(x)                                         y:  1 - y^2
//   clip        min(max(x, min), max)                           x:  min <= x <= max ? 1 : 0
//   swish       x * s(beta * x)         (SiLU for beta = 1)     x:  s + beta * x * s * (1 - s)
//   gelu_erf    x * Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2 x:  Phi(x) + x * phi(x)
//   gelu_tanh   x * (1 + tanh(u)) / 2,                          x:  (1 + t) / 2
//               u = sqrt(2 / pi) * (x + 0.044715 x^3)                + x (1 - t^2) u' / 2
//   hardsigmoid r(x) / 6,  r(x) = min(max(x + 3, 0), 6)           x:  -3 < x < 3 ? 1/6 : 0
//   hardswish   x * r(x) / 6                                    x:  x < -3 ? 0 : x < 3 ? x/3 + 1/2
//                                                                       : 1
//   mish        x * tanh(softplus(x)),                          x:  t + x * s * (1 - t^2)
//               softplus(x) = log(1 + exp(x))                       (t = tanh(softplus(x)),
//                                                                    s = s(x) = softplus'(x))
//   softsign    x / (1 + |x|)                                   x:  1 / (1 + |x|)^2
//               (t = tanh(u), u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2),
//                phi(x) = exp(-x^2 / 2) / sqrt(2 pi), the normal density)
//
// The backward reads the forward's output y where y determines f'(x) (ELU for alpha >= 0,
// sigmoid, tanh): a layer then runs in place for free. The others need the input x: a layer
// running in place keeps a copy of x (see layers/activations.cpp). Clip passes the gradient
// where min <= x <= max inclusive, PyTorch's clamp convention (its hardtanh and relu6 exclude the
// ends; from y alone the two cases x = min and x < min cannot be told apart, hence x). At x = 0,
// ELU's derivative is alpha (PyTorch's value). Hardsigmoid and hardswish (Howard et al. 2019,
// "Searching for MobileNetV3") take PyTorch's values at the kinks: hardsigmoid's gradient is 0 at
// x = -3 and x = 3, hardswish's is -1/2 at x = -3 (the inner piece) and 1 at x = 3 (the
// outer one), PyTorch 1.13's vectorized CPU hardswish_backward (its scalar loop and CUDA kernel
// give 3/2 at x = 3; PyTorch since 2025 gives 0 at -3: README.md). Hardsigmoid's y would tell
// -3 < x < 3 only up to rounding (x + 3 rounds to 6 just below x = 3), hence x. Mish (Misra 2019,
// "Mish: A Self Regularized Non-Monotonic Activation Function"; PyTorch's nn.Mish) is not
// monotonic, so y does not determine x: its backward reads x. Softsign (Glorot and Bengio 2010,
// "Understanding the difficulty of training deep feedforward neural networks"; PyTorch's
// nn.Softsign) reads x too: its y does determine f'(x) = (1 - |y|)^2, but 1 - |y| cancels for
// large |x| (relative error eps |x|), where 1 / (1 + |x|)^2 from x does not.
//
// y may alias x and dx may alias dy (the same pointer; partial overlaps are not allowed).
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class ActivationKind {
  elu,
  sigmoid,
  tanh,
  clip,
  swish,
  gelu_erf,
  gelu_tanh,
  hardsigmoid,
  hardswish,
  mish,
  softsign
};

// One activation and its constants; the fields other kinds ignore keep their defaults.
struct Activation {
  ActivationKind kind = ActivationKind::sigmoid;
  float alpha = 1.0f;  // elu; >= 0
  float beta = 1.0f;   // swish
  float min = 0.0f;    // clip; min <= max
  float max = 6.0f;    // clip
};

// What activation_backward reads besides dy: the forward's input x or its output y.
enum class BackwardReads { input, output };
BackwardReads backward_reads(ActivationKind kind);
const char* activation_name(ActivationKind kind);

namespace ref {
// The formulas above, one element at a time; explicitly instantiated for float and double.
// `saved` is x or y as backward_reads(a.kind) says.
template <class T>
void activation_forward(const Activation& a, int64_t n, const T* x, T* y);
template <class T>
void activation_backward(const Activation& a, int64_t n, const T* saved, const T* dy, T* dx);
}  // namespace ref

namespace cpu {
// The same, vectorized through Eigen's packet math, on up to `num_threads` OpenMP threads.
void activation_forward(const Activation& a, int64_t n, const float* x, float* y, int num_threads);
void activation_backward(const Activation& a, int64_t n, const float* saved, const float* dy,
                         float* dx, int num_threads);
}  // namespace cpu

namespace cuda {
// scalar: one element per thread; vectorized: 16 bytes per thread and access (4 floats, 8 bf16 or
// f16; scalar where a pointer is not 16-byte aligned). The same values, bit for bit, in both
// versions. T is float, bf16_t or f16_t: the functions compute in float, the output is rounded
// once to T.
enum class PointwiseVersion { scalar, vectorized, best = vectorized };
template <class T>
void activation_forward(const Activation& a, int64_t n, const T* x, T* y, PointwiseVersion version,
                        gpu::Stream stream);
template <class T>
void activation_backward(const Activation& a, int64_t n, const T* saved, const T* dy, T* dx,
                         PointwiseVersion version, gpu::Stream stream);
}  // namespace cuda

// Tensor level: tensors of one shape and dtype on the context's device (f32 on CPU and CUDA, f64
// on the CPU, which runs ref::, bf16 and f16 on CUDA); the constants valid
// (alpha >= 0, min <= max, all finite). Throws crema::Error naming the op and what is wrong.
void activation_forward(Context& ctx, const Activation& a, const Tensor& x, Tensor& y);
void activation_backward(Context& ctx, const Activation& a, const Tensor& saved, const Tensor& dy,
                         Tensor& dx);

}  // namespace crema::kernels
