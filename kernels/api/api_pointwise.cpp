// The primitive API's activations, softmax and dropout (stage.h has the staging rules).
#include "core/error.h"
#include "kernels/activations/relu.h"
#include "kernels/api/primitives.h"
#include "kernels/api/stage.h"
#include "kernels/dropout/dropout.h"
#include "kernels/softmax/softmax.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::api {

using stage::Output;
using stage::packed_input;
using stage::require_rank;
using stage::validate_all;
using stage::Writes;

namespace {

ActivationKind kind_of(ActivationMode mode) {
  switch (mode) {
    case ActivationMode::sigmoid:
      return ActivationKind::sigmoid;
    case ActivationMode::tanh:
      return ActivationKind::tanh;
    case ActivationMode::clip:
      return ActivationKind::clip;
    case ActivationMode::elu:
      return ActivationKind::elu;
    case ActivationMode::swish:
      return ActivationKind::swish;
    case ActivationMode::gelu_erf:
      return ActivationKind::gelu_erf;
    case ActivationMode::gelu_tanh:
      return ActivationKind::gelu_tanh;
    case ActivationMode::hardsigmoid:
      return ActivationKind::hardsigmoid;
    case ActivationMode::hardswish:
      return ActivationKind::hardswish;
    case ActivationMode::mish:
      return ActivationKind::mish;
    case ActivationMode::softsign:
      return ActivationKind::softsign;
    case ActivationMode::relu:
    case ActivationMode::identity:
      break;
  }
  CREMA_CHECK(false, "activation mode without a pointwise kind");
  return ActivationKind::sigmoid;
}

// Softmax's view: channel mode is axis 1 of x as it is; instance mode is axis 1 of [N, rest].
Shape softmax_shape(SoftmaxMode mode, const TensorDesc& d) {
  if (mode == SoftmaxMode::channel) return d.dims;
  return {d.dims[0], d.numel() / (d.dims[0] == 0 ? 1 : d.dims[0])};
}

}  // namespace

void activation_forward(Context& ctx, const ActivationDesc& act, double alpha, const TensorDesc& x,
                        double beta, const TensorDesc& y) {
  const char* op = "activation_forward";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  validate_dims(op, "y", y, x.dims);
  if (act.mode == ActivationMode::identity)
    return stage::blend_into(ctx, alpha, x, x.strides, beta, y);
  const Tensor xt = packed_input(ctx, x);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x});
  if (act.mode == ActivationMode::relu) {
    relu_forward(ctx, xt, out.tensor(), act.negative_slope);
  } else {
    Activation a = act.pointwise;
    a.kind = kind_of(act.mode);
    kernels::activation_forward(ctx, a, xt, out.tensor());
  }
  out.finish();
}

void activation_backward(Context& ctx, const ActivationDesc& act, double alpha, const TensorDesc& y,
                         const TensorDesc& dy, const TensorDesc& x, double beta,
                         const TensorDesc& dx) {
  const char* op = "activation_backward";
  validate_all(ctx, op, {{"y", &y}, {"dy", &dy}, {"x", &x}, {"dx", &dx}});
  validate_dims(op, "dy", dy, y.dims);
  validate_dims(op, "x", x, y.dims);
  validate_dims(op, "dx", dx, y.dims);
  if (act.mode == ActivationMode::identity)
    return stage::blend_into(ctx, alpha, dy, dy.strides, beta, dx);
  const Tensor dyt = packed_input(ctx, dy);
  Output out(ctx, dx, alpha, beta, Writes::whole, {&y, &dy, &x});
  if (act.mode == ActivationMode::relu) {
    relu_backward(ctx, packed_input(ctx, y), dyt, out.tensor(), act.negative_slope);
  } else {
    Activation a = act.pointwise;
    a.kind = kind_of(act.mode);
    const Tensor saved = packed_input(ctx, backward_reads(a.kind) == BackwardReads::input ? x : y);
    kernels::activation_backward(ctx, a, saved, dyt, out.tensor());
  }
  out.finish();
}

void softmax_forward(Context& ctx, SoftmaxAlgo algo, SoftmaxMode mode, double alpha,
                     const TensorDesc& x, double beta, const TensorDesc& y) {
  const char* op = "softmax_forward";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  require_rank(op, "x", x, 2, true);
  validate_dims(op, "y", y, x.dims);
  const Shape view = softmax_shape(mode, x);
  const Tensor xt = packed_input(ctx, x).view(view);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x});
  Tensor yt = out.tensor(view);
  switch (algo) {
    case SoftmaxAlgo::accurate:
      kernels::softmax_forward(ctx, xt, yt, 1);
      break;
    case SoftmaxAlgo::fast:
      softmax_fast_forward(ctx, xt, yt, 1);
      break;
    case SoftmaxAlgo::log:
      log_softmax_forward(ctx, xt, yt, 1);
      break;
  }
  out.finish();
}

void softmax_backward(Context& ctx, SoftmaxAlgo algo, SoftmaxMode mode, double alpha,
                      const TensorDesc& y, const TensorDesc& dy, double beta,
                      const TensorDesc& dx) {
  const char* op = "softmax_backward";
  validate_all(ctx, op, {{"y", &y}, {"dy", &dy}, {"dx", &dx}});
  require_rank(op, "y", y, 2, true);
  validate_dims(op, "dy", dy, y.dims);
  validate_dims(op, "dx", dx, y.dims);
  const Shape view = softmax_shape(mode, y);
  const Tensor yt = packed_input(ctx, y).view(view), dyt = packed_input(ctx, dy).view(view);
  Output out(ctx, dx, alpha, beta, Writes::whole, {&y, &dy});
  Tensor dxt = out.tensor(view);
  if (algo == SoftmaxAlgo::log) {
    log_softmax_backward(ctx, yt, dyt, dxt, 1);
  } else {
    kernels::softmax_backward(ctx, yt, dyt, dxt, 1);  // the fast softmax's backward too
  }
  out.finish();
}

DropoutState DropoutState::create(Context& ctx, float ratio, uint64_t seed) {
  return {ratio, seed, dropout_step_counter(ctx)};
}

void dropout_forward(Context& ctx, DropoutState& state, double alpha, const TensorDesc& x,
                     double beta, const TensorDesc& y) {
  const char* op = "dropout_forward";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  validate_dims(op, "y", y, x.dims);
  const Tensor xt = packed_input(ctx, x);
  Output out(ctx, y, alpha, beta, Writes::whole, {&x});
  kernels::dropout_forward(ctx, xt, out.tensor(), state.ratio, state.seed, state.step);
  out.finish();
}

void dropout_backward(Context& ctx, const DropoutState& state, double alpha, const TensorDesc& dy,
                      double beta, const TensorDesc& dx) {
  const char* op = "dropout_backward";
  validate_all(ctx, op, {{"dy", &dy}, {"dx", &dx}});
  validate_dims(op, "dx", dx, dy.dims);
  const Tensor dyt = packed_input(ctx, dy);
  Output out(ctx, dx, alpha, beta, Writes::whole, {&dy});
  kernels::dropout_backward(ctx, dyt, out.tensor(), state.ratio, state.seed, state.step);
  out.finish();
}

}  // namespace crema::kernels::api
