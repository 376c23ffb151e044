// Pointwise activations, dispatch: checks the constants and the tensors once, then runs the path
// for the device and dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU:
// the reference).
#include "kernels/activations/pointwise.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// The constants each kind reads: finite, alpha >= 0 (ELU's backward reads y, whose sign must tell
// x > 0), min <= max.
void check_constants(const std::string& op, const Activation& a) {
  const std::string what = op + " (" + activation_name(a.kind) + "): ";
  if (a.kind == ActivationKind::elu && !(std::isfinite(a.alpha) && a.alpha >= 0.0f)) {
    throw Error(what + "alpha " + std::to_string(a.alpha) + " must be finite and >= 0");
  }
  if (a.kind == ActivationKind::swish && !std::isfinite(a.beta)) {
    throw Error(what + "beta must be finite");
  }
  if (a.kind == ActivationKind::clip && !(a.min <= a.max)) {
    throw Error(what + "min " + std::to_string(a.min) + " must not exceed max " +
                std::to_string(a.max));
  }
}

}  // namespace

BackwardReads backward_reads(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::elu:
    case ActivationKind::sigmoid:
    case ActivationKind::tanh:
      return BackwardReads::output;
    case ActivationKind::clip:
    case ActivationKind::swish:
    case ActivationKind::gelu_erf:
    case ActivationKind::gelu_tanh:
    case ActivationKind::hardsigmoid:
    case ActivationKind::hardswish:
    case ActivationKind::mish:
    case ActivationKind::softsign:
      return BackwardReads::input;
  }
  return BackwardReads::input;
}

const char* activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::elu:
      return "elu";
    case ActivationKind::sigmoid:
      return "sigmoid";
    case ActivationKind::tanh:
      return "tanh";
    case ActivationKind::clip:
      return "clip";
    case ActivationKind::swish:
      return "swish";
    case ActivationKind::gelu_erf:
      return "gelu_erf";
    case ActivationKind::gelu_tanh:
      return "gelu_tanh";
    case ActivationKind::hardsigmoid:
      return "hardsigmoid";
    case ActivationKind::hardswish:
      return "hardswish";
    case ActivationKind::mish:
      return "mish";
    case ActivationKind::softsign:
      return "softsign";
  }
  return "unknown";
}

void activation_forward(Context& ctx, const Activation& a, const Tensor& x, Tensor& y) {
  const char* op = "activation_forward";
  check_constants(op, a);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::activation_forward(a, x.numel(), x.data<T>(), y.data<T>(), cuda::PointwiseVersion::best,
                             stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::activation_forward(a, x.numel(), x.data<float>(), y.data<float>(),
                                            ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::activation_forward(a, x.numel(), x.data<double>(), y.data<double>());
           }));
}

void activation_backward(Context& ctx, const Activation& a, const Tensor& saved, const Tensor& dy,
                         Tensor& dx) {
  const char* op = "activation_backward";
  check_constants(op, a);
  const char* saved_name = backward_reads(a.kind) == BackwardReads::output ? "y" : "x";
  const DType dtype = saved.dtype();
  check_tensors(ctx, op, saved.shape(), dtype, {{saved_name, saved}, {"dy", dy}, {"dx", dx}});
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::activation_backward(a, saved.numel(), saved.data<T>(), dy.data<T>(), dx.data<T>(),
                              cuda::PointwiseVersion::best, stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::activation_backward(a, saved.numel(), saved.data<float>(),
                                             dy.data<float>(), dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::activation_backward(a, saved.numel(), saved.data<double>(), dy.data<double>(),
                                      dx.data<double>());
           }));
}

}  // namespace crema::kernels
