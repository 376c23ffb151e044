// Batch normalization, plain (batch_norm.h) and fused with the ReLU (batch_norm_relu.h), dispatch:
// checks the tensors and the hyper-parameters once, then runs the path for the device and dtype
// (float32: cpu:: or cuda::; float64 on the CPU: the reference). Optional tensors are undefined
// Tensors here and null pointers below.
#include "kernels/batch_norm/batch_norm.h"

#include <climits>
#include <string>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm_relu.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

// The CUDA version production runs (the others are measured by the tests).
constexpr cuda::BatchNormVersion kVersion = cuda::BatchNormVersion::best;

BatchNormShape shape_of(const std::string& op, const Tensor& x) {
  if (!x.defined() || x.ndim() < 2) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected at least 2 axes [N, C, ...]");
  }
  return batch_norm_shape(x.shape());
}

void check_optional(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                    const Shape& shape, DType dtype) {
  if (t.defined()) check_tensor(ctx, op, name, t, shape, dtype);
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// What both forwards check first: x and y alike, the optional affine parameters of x's dtype.
BatchNormShape check_forward(const Context& ctx, const std::string& op, const Tensor& x,
                             const Tensor& y, const Tensor& gamma, const Tensor& beta) {
  const BatchNormShape s = shape_of(op, x);
  check_tensors(ctx, op, x.shape(), x.dtype(), {{"x", x}, {"y", y}});
  check_optional(ctx, op, "gamma", gamma, {s.C}, x.dtype());
  check_optional(ctx, op, "beta", beta, {s.C}, x.dtype());
  return s;
}

void check_momentum(const std::string& op, float momentum) {
  if (!(momentum >= 0.0f && momentum <= 1.0f)) {
    throw Error(op + ": momentum " + std::to_string(momentum) + " must be in [0, 1]");
  }
}

// Batch statistics need two values per channel.
void check_batch(const std::string& op, const Tensor& x, const BatchNormShape& s) {
  if (s.N * s.S < 2) {
    throw Error(op + ": x is " + x.description() +
                ": batch statistics need more than one value per channel");
  }
}

void check_eps(const std::string& op, float eps) {
  if (!(eps >= 0.0f)) throw Error(op + ": eps " + std::to_string(eps) + " must be >= 0");
}

// The CUDA kernels index a channel's values with 32-bit integers.
void check_channel_size(const Context& ctx, const std::string& op, const BatchNormShape& s) {
  if (ctx.device().is_cuda() && s.N * s.S > INT_MAX) {
    throw Error(op + ": a channel of " + std::to_string(s.N * s.S) +
                " values is more than the CUDA kernels index (2^31 - 1)");
  }
}

// What a training forward (plain or fused) checks beyond x, y and the affine parameters: the
// saved statistics, the running averages, eps, momentum, the batch and the channel's size.
void check_training_state(const Context& ctx, const std::string& op, const Tensor& x,
                          const BatchNormShape& s, const Tensor& save_mean,
                          const Tensor& save_invstd, const Tensor& running_mean,
                          const Tensor& running_var, const Tensor& num_batches_tracked, float eps,
                          float momentum) {
  const DType dtype = x.dtype();
  check_tensors(ctx, op, {s.C}, dtype, {{"save_mean", save_mean}, {"save_invstd", save_invstd}});
  check_optional(ctx, op, "running_mean", running_mean, {s.C}, dtype);
  check_optional(ctx, op, "running_var", running_var, {s.C}, dtype);
  if (num_batches_tracked.defined()) {
    check_scalar(ctx, op, "num_batches_tracked", num_batches_tracked, dtype);
  }
  check_eps(op, eps);
  check_momentum(op, momentum);
  check_batch(op, x, s);
  check_channel_size(ctx, op, s);
}

}  // namespace

void batch_norm_forward_training(Context& ctx, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, float eps, float momentum, Tensor& y,
                                 Tensor& save_mean, Tensor& save_invstd, Tensor& running_mean,
                                 Tensor& running_var, Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_forward_training";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  const DType dtype = x.dtype();
  check_training_state(ctx, op, x, s, save_mean, save_invstd, running_mean, running_var,
                       num_batches_tracked, eps, momentum);
  dispatch(
      ctx, op.c_str(), dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                void* workspace = workspace_for(ctx, cuda::batch_norm_workspace_bytes(s, kVersion));
                cuda::batch_norm_forward_training(
                    s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta), eps,
                    momentum, y.data<float>(), save_mean.data<float>(), save_invstd.data<float>(),
                    data_or_null<float>(running_mean), data_or_null<float>(running_var),
                    data_or_null<float>(num_batches_tracked), workspace, kVersion, stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::batch_norm_forward_training(
                   s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta), eps,
                   momentum, y.data<float>(), save_mean.data<float>(), save_invstd.data<float>(),
                   data_or_null<float>(running_mean), data_or_null<float>(running_var),
                   data_or_null<float>(num_batches_tracked), ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::batch_norm_forward_training(
            s, x.data<double>(), data_or_null<double>(gamma), data_or_null<double>(beta),
            double(eps), double(momentum), y.data<double>(), save_mean.data<double>(),
            save_invstd.data<double>(), data_or_null<double>(running_mean),
            data_or_null<double>(running_var), data_or_null<double>(num_batches_tracked));
      }));
}

void batch_norm_forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean,
                                  const Tensor& running_var, float eps, Tensor& y,
                                  Tensor& save_mean, Tensor& save_invstd) {
  const std::string op = "batch_norm_forward_inference";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, {s.C}, dtype,
                {{"running_mean", running_mean},
                 {"running_var", running_var},
                 {"save_mean", save_mean},
                 {"save_invstd", save_invstd}});
  check_eps(op, eps);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::batch_norm_forward_inference(
                         s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta),
                         running_mean.data<float>(), running_var.data<float>(), eps,
                         y.data<float>(), save_mean.data<float>(), save_invstd.data<float>(),
                         stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::batch_norm_forward_inference(
                        s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta),
                        running_mean.data<float>(), running_var.data<float>(), eps, y.data<float>(),
                        save_mean.data<float>(), save_invstd.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::batch_norm_forward_inference(
                 s, x.data<double>(), data_or_null<double>(gamma), data_or_null<double>(beta),
                 running_mean.data<double>(), running_var.data<double>(), double(eps),
                 y.data<double>(), save_mean.data<double>(), save_invstd.data<double>());
           }));
}

void batch_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, bool batch_stats,
                         Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "batch_norm_backward";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  check_optional(ctx, op, "dx", dx, x.shape(), dtype);
  check_optional(ctx, op, "gamma", gamma, {s.C}, dtype);
  check_tensors(ctx, op, {s.C}, dtype, {{"save_mean", save_mean}, {"save_invstd", save_invstd}});
  check_optional(ctx, op, "dgamma", dgamma, {s.C}, dtype);
  check_optional(ctx, op, "dbeta", dbeta, {s.C}, dtype);
  check_channel_size(ctx, op, s);
  dispatch(
      ctx, op.c_str(), dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                void* workspace = workspace_for(ctx, cuda::batch_norm_workspace_bytes(s, kVersion));
                cuda::batch_norm_backward(s, x.data<float>(), dy.data<float>(),
                                          data_or_null<float>(gamma), save_mean.data<float>(),
                                          save_invstd.data<float>(), batch_stats,
                                          data_or_null<float>(dx), data_or_null<float>(dgamma),
                                          data_or_null<float>(dbeta), workspace, kVersion, stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::batch_norm_backward(s, x.data<float>(), dy.data<float>(),
                                        data_or_null<float>(gamma), save_mean.data<float>(),
                                        save_invstd.data<float>(), batch_stats,
                                        data_or_null<float>(dx), data_or_null<float>(dgamma),
                                        data_or_null<float>(dbeta), ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::batch_norm_backward(s, x.data<double>(), dy.data<double>(),
                                 data_or_null<double>(gamma), save_mean.data<double>(),
                                 save_invstd.data<double>(), batch_stats, data_or_null<double>(dx),
                                 data_or_null<double>(dgamma), data_or_null<double>(dbeta));
      }));
}

void batch_norm_relu_forward_training(Context& ctx, const Tensor& x, const Tensor& r,
                                      const Tensor& gamma, const Tensor& beta, float eps,
                                      float momentum, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                      Tensor& save_invstd, Tensor& running_mean,
                                      Tensor& running_var, Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_relu_forward_training";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  const DType dtype = x.dtype();
  check_optional(ctx, op, "r", r, x.shape(), dtype);
  check_optional(ctx, op, "x_copy", x_copy, x.shape(), dtype);
  check_training_state(ctx, op, x, s, save_mean, save_invstd, running_mean, running_var,
                       num_batches_tracked, eps, momentum);
  dispatch(
      ctx, op.c_str(), dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                void* workspace = workspace_for(ctx, cuda::batch_norm_workspace_bytes(s, kVersion));
                cuda::batch_norm_relu_forward_training(
                    s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
                    data_or_null<float>(beta), eps, momentum, y.data<float>(),
                    data_or_null<float>(x_copy), save_mean.data<float>(), save_invstd.data<float>(),
                    data_or_null<float>(running_mean), data_or_null<float>(running_var),
                    data_or_null<float>(num_batches_tracked), workspace, stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::batch_norm_relu_forward_training(
                   s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
                   data_or_null<float>(beta), eps, momentum, y.data<float>(),
                   data_or_null<float>(x_copy), save_mean.data<float>(), save_invstd.data<float>(),
                   data_or_null<float>(running_mean), data_or_null<float>(running_var),
                   data_or_null<float>(num_batches_tracked), ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::batch_norm_relu_forward_training(
            s, x.data<double>(), data_or_null<double>(r), data_or_null<double>(gamma),
            data_or_null<double>(beta), double(eps), double(momentum), y.data<double>(),
            data_or_null<double>(x_copy), save_mean.data<double>(), save_invstd.data<double>(),
            data_or_null<double>(running_mean), data_or_null<double>(running_var),
            data_or_null<double>(num_batches_tracked));
      }));
}

void batch_norm_relu_forward_inference(Context& ctx, const Tensor& x, const Tensor& r,
                                       const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var,
                                       float eps, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                       Tensor& save_invstd) {
  const std::string op = "batch_norm_relu_forward_inference";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  const DType dtype = x.dtype();
  check_optional(ctx, op, "r", r, x.shape(), dtype);
  check_optional(ctx, op, "x_copy", x_copy, x.shape(), dtype);
  check_tensors(ctx, op, {s.C}, dtype,
                {{"running_mean", running_mean},
                 {"running_var", running_var},
                 {"save_mean", save_mean},
                 {"save_invstd", save_invstd}});
  check_eps(op, eps);
  dispatch(
      ctx, op.c_str(), dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                cuda::batch_norm_relu_forward_inference(
                    s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
                    data_or_null<float>(beta), running_mean.data<float>(),
                    running_var.data<float>(), eps, y.data<float>(), data_or_null<float>(x_copy),
                    save_mean.data<float>(), save_invstd.data<float>(), stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::batch_norm_relu_forward_inference(
                   s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
                   data_or_null<float>(beta), running_mean.data<float>(), running_var.data<float>(),
                   eps, y.data<float>(), data_or_null<float>(x_copy), save_mean.data<float>(),
                   save_invstd.data<float>(), ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::batch_norm_relu_forward_inference(
            s, x.data<double>(), data_or_null<double>(r), data_or_null<double>(gamma),
            data_or_null<double>(beta), running_mean.data<double>(), running_var.data<double>(),
            double(eps), y.data<double>(), data_or_null<double>(x_copy), save_mean.data<double>(),
            save_invstd.data<double>());
      }));
}

void batch_norm_relu_backward(Context& ctx, const Tensor& x, const Tensor& r, const Tensor& dy,
                              const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                              const Tensor& save_invstd, bool batch_stats, Tensor& dx, Tensor& dr,
                              Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "batch_norm_relu_backward";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  check_optional(ctx, op, "r", r, x.shape(), dtype);
  check_optional(ctx, op, "dx", dx, x.shape(), dtype);
  check_optional(ctx, op, "dr", dr, x.shape(), dtype);
  if (dr.defined() && !r.defined()) throw Error(op + ": dr is given but r is not");
  check_optional(ctx, op, "gamma", gamma, {s.C}, dtype);
  check_optional(ctx, op, "beta", beta, {s.C}, dtype);
  check_tensors(ctx, op, {s.C}, dtype, {{"save_mean", save_mean}, {"save_invstd", save_invstd}});
  check_optional(ctx, op, "dgamma", dgamma, {s.C}, dtype);
  check_optional(ctx, op, "dbeta", dbeta, {s.C}, dtype);
  check_channel_size(ctx, op, s);
  dispatch(
      ctx, op.c_str(), dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                void* workspace = workspace_for(ctx, cuda::batch_norm_workspace_bytes(s, kVersion));
                cuda::batch_norm_relu_backward(
                    s, x.data<float>(), data_or_null<float>(r), dy.data<float>(),
                    data_or_null<float>(gamma), data_or_null<float>(beta), save_mean.data<float>(),
                    save_invstd.data<float>(), batch_stats, data_or_null<float>(dx),
                    data_or_null<float>(dr), data_or_null<float>(dgamma),
                    data_or_null<float>(dbeta), workspace, stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::batch_norm_relu_backward(
                   s, x.data<float>(), data_or_null<float>(r), dy.data<float>(),
                   data_or_null<float>(gamma), data_or_null<float>(beta), save_mean.data<float>(),
                   save_invstd.data<float>(), batch_stats, data_or_null<float>(dx),
                   data_or_null<float>(dr), data_or_null<float>(dgamma), data_or_null<float>(dbeta),
                   ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::batch_norm_relu_backward(
            s, x.data<double>(), data_or_null<double>(r), dy.data<double>(),
            data_or_null<double>(gamma), data_or_null<double>(beta), save_mean.data<double>(),
            save_invstd.data<double>(), batch_stats, data_or_null<double>(dx),
            data_or_null<double>(dr), data_or_null<double>(dgamma), data_or_null<double>(dbeta));
      }));
}

}  // namespace crema::kernels
