// Per-activation batch normalization (cuDNN's CUDNN_BATCHNORM_PER_ACTIVATION): every element of
// x's [C, ...] has its own statistics, taken over the batch N only. That is the channel batch norm
// of batch_norm.h on x viewed as [N, C*S] (S = 1: each "channel" is one activation), so these
// entries check the per-activation shapes, view the tensors and run the same dispatch, kernels
// and reference. x is nchw (its [C, H, W] is the statistics' order): an nhwc x is refused.
#include <string>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// x's axes after the batch: the shape of gamma, beta and every statistic.
Shape activation_shape(const std::string& op, const Tensor& x) {
  if (!x.defined() || x.ndim() < 2) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected at least 2 axes [N, C, ...]");
  }
  if (x.ndim() == 4 && x.layout() == Layout::nhwc) {
    throw Error(op + ": x is " + x.description() +
                ": per-activation statistics follow the [C, H, W] order of nchw; convert x first");
  }
  return Shape(x.shape().begin() + 1, x.shape().end());
}

// x (or y, dy, dx) as [N, C*S].
Tensor flat_batch(const Tensor& t) {
  return t.defined() ? t.view({t.dim(0), shape_count(t.shape(), 1, t.ndim())}) : t;
}

// A per-activation tensor, checked against x's activation shape when defined, as [C*S].
Tensor flat_activation(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                       const Shape& shape, DType dtype) {
  if (!t.defined()) return t;
  check_tensor(ctx, op, name, t, shape, dtype);
  return t.view({shape_numel(shape)});
}

}  // namespace

void batch_norm_per_activation_forward_training(Context& ctx, const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, float eps, float momentum,
                                                Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                                                Tensor& running_mean, Tensor& running_var,
                                                Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_per_activation_forward_training";
  const Shape a = activation_shape(op, x);
  const DType t = x.dtype();
  check_tensor(ctx, op, "y", y, x.shape(), t);
  Tensor yv = flat_batch(y), mean = flat_activation(ctx, op, "save_mean", save_mean, a, t),
         invstd = flat_activation(ctx, op, "save_invstd", save_invstd, a, t),
         rmean = flat_activation(ctx, op, "running_mean", running_mean, a, t),
         rvar = flat_activation(ctx, op, "running_var", running_var, a, t);
  batch_norm_forward_training(ctx, flat_batch(x), flat_activation(ctx, op, "gamma", gamma, a, t),
                              flat_activation(ctx, op, "beta", beta, a, t), eps, momentum, yv, mean,
                              invstd, rmean, rvar, num_batches_tracked);
}

void batch_norm_per_activation_forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, const Tensor& running_mean,
                                                 const Tensor& running_var, float eps, Tensor& y,
                                                 Tensor& save_mean, Tensor& save_invstd) {
  const std::string op = "batch_norm_per_activation_forward_inference";
  const Shape a = activation_shape(op, x);
  const DType t = x.dtype();
  check_tensor(ctx, op, "y", y, x.shape(), t);
  Tensor yv = flat_batch(y), mean = flat_activation(ctx, op, "save_mean", save_mean, a, t),
         invstd = flat_activation(ctx, op, "save_invstd", save_invstd, a, t);
  batch_norm_forward_inference(ctx, flat_batch(x), flat_activation(ctx, op, "gamma", gamma, a, t),
                               flat_activation(ctx, op, "beta", beta, a, t),
                               flat_activation(ctx, op, "running_mean", running_mean, a, t),
                               flat_activation(ctx, op, "running_var", running_var, a, t), eps, yv,
                               mean, invstd);
}

void batch_norm_per_activation_backward(Context& ctx, const Tensor& x, const Tensor& dy,
                                        const Tensor& gamma, const Tensor& save_mean,
                                        const Tensor& save_invstd, bool batch_stats, Tensor& dx,
                                        Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "batch_norm_per_activation_backward";
  const Shape a = activation_shape(op, x);
  const DType t = x.dtype();
  check_tensor(ctx, op, "dy", dy, x.shape(), t);
  if (dx.defined()) check_tensor(ctx, op, "dx", dx, x.shape(), t);
  Tensor dxv = flat_batch(dx), dgv = flat_activation(ctx, op, "dgamma", dgamma, a, t),
         dbv = flat_activation(ctx, op, "dbeta", dbeta, a, t);
  batch_norm_backward(
      ctx, flat_batch(x), flat_batch(dy), flat_activation(ctx, op, "gamma", gamma, a, t),
      flat_activation(ctx, op, "save_mean", save_mean, a, t),
      flat_activation(ctx, op, "save_invstd", save_invstd, a, t), batch_stats, dxv, dgv, dbv);
}

}  // namespace crema::kernels
