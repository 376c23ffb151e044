// Pointwise activations, dispatch: checks the constants and the tensors once, then runs the CPU
// or the CUDA path.
#include "kernels/activations/pointwise.h"

#include <cmath>
#include <string>

#include "core/error.h"
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
  }
  return "unknown";
}

void activation_forward(Context& ctx, const Activation& a, const Tensor& x, Tensor& y) {
  check_constants("activation_forward", a);
  check_tensor(ctx, "activation_forward", "x", x, x.shape());
  check_tensor(ctx, "activation_forward", "y", y, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::activation_forward(a, x.numel(), x.data<float>(), y.data<float>(),
                             cuda::PointwiseVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::activation_forward(a, x.numel(), x.data<float>(), y.data<float>(), ctx.num_threads());
}

void activation_backward(Context& ctx, const Activation& a, const Tensor& saved, const Tensor& dy,
                         Tensor& dx) {
  check_constants("activation_backward", a);
  const char* saved_name = backward_reads(a.kind) == BackwardReads::output ? "y" : "x";
  check_tensor(ctx, "activation_backward", saved_name, saved, saved.shape());
  check_tensor(ctx, "activation_backward", "dy", dy, saved.shape());
  check_tensor(ctx, "activation_backward", "dx", dx, saved.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::activation_backward(a, saved.numel(), saved.data<float>(), dy.data<float>(),
                              dx.data<float>(), cuda::PointwiseVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::activation_backward(a, saved.numel(), saved.data<float>(), dy.data<float>(),
                           dx.data<float>(), ctx.num_threads());
}

}  // namespace crema::kernels
