// Batch normalization, plain (batch_norm.h) and fused with the ReLU (batch_norm_relu.h), dispatch:
// checks the tensors and the hyper-parameters once, then runs the path for the device and dtype
// (float32: cpu:: or cuda::; bf16 and f16 activations with float32 statistics: cuda::; float64 on
// the CPU: the reference). Every path serves both layouts: a 4-D nhwc x is normalized as the
// [N*H*W, C, 1] view of its memory (shape_of), which the CPU walks by rows and CUDA runs as
// rows_tiled (batch_norm_version_for). Optional tensors are undefined Tensors here and null
// pointers below.
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

// x's layout as the kernels see it: only a 4-D tensor has a choice.
Layout layout_of(const Tensor& x) {
  return x.ndim() == 4 ? x.layout() : Layout::nchw;
}

BatchNormShape shape_of(const std::string& op, const Tensor& x) {
  if (!x.defined() || x.ndim() < 2) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected at least 2 axes [N, C, ...]");
  }
  if (layout_of(x) == Layout::nhwc) return {x.dim(0) * x.dim(2) * x.dim(3), x.dim(1), 1};
  return batch_norm_shape(x.shape());
}

// The dtype of gamma, beta and the statistics beside `x` activations: f64 beside f64 (the
// reference), f32 beside f32, bf16 and f16 (mixed precision keeps them in fp32).
DType param_dtype(const Tensor& x) {
  return x.dtype() == DType::f64 ? DType::f64 : DType::f32;
}

void check_optional(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                    const Shape& shape, DType dtype) {
  if (t.defined()) check_tensor(ctx, op, name, t, shape, dtype);
}

// An activation of x's shape, dtype and layout (when defined, for the optional ones).
void check_like_x(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                  const Tensor& x) {
  if (!t.defined()) return;
  check_tensor(ctx, op, name, t, x.shape(), x.dtype());
  check_layout(op, name, t, layout_of(x));
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// What both forwards check first: x and y alike, the optional affine parameters.
BatchNormShape check_forward(const Context& ctx, const std::string& op, const Tensor& x,
                             const Tensor& y, const Tensor& gamma, const Tensor& beta) {
  const BatchNormShape s = shape_of(op, x);
  check_tensor(ctx, op, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, op, "y", y, x.shape(), x.dtype());
  check_layout(op, "y", y, layout_of(x));
  check_optional(ctx, op, "gamma", gamma, {s.C}, param_dtype(x));
  check_optional(ctx, op, "beta", beta, {s.C}, param_dtype(x));
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
  const DType dtype = param_dtype(x);
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

// What an inference forward checks beyond x, y and the affine parameters.
void check_inference_state(const Context& ctx, const std::string& op, const Tensor& x,
                           const BatchNormShape& s, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& save_mean,
                           const Tensor& save_invstd, float eps) {
  check_tensors(ctx, op, {s.C}, param_dtype(x),
                {{"running_mean", running_mean},
                 {"running_var", running_var},
                 {"save_mean", save_mean},
                 {"save_invstd", save_invstd}});
  check_eps(op, eps);
}

// The one dispatch of every function below, in both layouts: `gpu(element, stream)` for float,
// bf16 and f16 activations on CUDA, `cpu()` for f32 and `ref()` for f64 on the CPU.
template <class Gpu, class Cpu, class Ref>
void run(const Context& ctx, const std::string& op, const Tensor& x, Gpu gpu, Cpu cpu, Ref ref) {
  dispatch(ctx, op.c_str(), x.dtype(), layout_of(x), on_cuda_typed<float>(gpu),
           on_cuda_typed<bf16_t>(gpu), on_cuda_typed<f16_t>(gpu),
           on_cuda_typed<float>(gpu, Layout::nhwc), on_cuda_typed<bf16_t>(gpu, Layout::nhwc),
           on_cuda_typed<f16_t>(gpu, Layout::nhwc), on_cpu(DType::f32, cpu),
           on_cpu(DType::f64, ref), on_cpu(DType::f32, cpu, Layout::nhwc),
           on_cpu(DType::f64, ref, Layout::nhwc));
}

// The CUDA scratch of the version production runs for `s`.
void* cuda_workspace(Context& ctx, const BatchNormShape& s) {
  return workspace_for(ctx, cuda::batch_norm_workspace_bytes(s, cuda::batch_norm_version_for(s)));
}

}  // namespace

void batch_norm_forward_training(Context& ctx, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, float eps, float momentum, Tensor& y,
                                 Tensor& save_mean, Tensor& save_invstd, Tensor& running_mean,
                                 Tensor& running_var, Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_forward_training";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  check_training_state(ctx, op, x, s, save_mean, save_invstd, running_mean, running_var,
                       num_batches_tracked, eps, momentum);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_forward_training(
            s, x.data<T>(), data_or_null<float>(gamma), data_or_null<float>(beta), eps, momentum,
            y.data<T>(), save_mean.data<float>(), save_invstd.data<float>(),
            data_or_null<float>(running_mean), data_or_null<float>(running_var),
            data_or_null<float>(num_batches_tracked), cuda_workspace(ctx, s),
            cuda::batch_norm_version_for(s), stream);
      },
      [&] {
        cpu::batch_norm_forward_training(
            s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta), eps,
            momentum, y.data<float>(), save_mean.data<float>(), save_invstd.data<float>(),
            data_or_null<float>(running_mean), data_or_null<float>(running_var),
            data_or_null<float>(num_batches_tracked), ctx.num_threads());
      },
      [&] {
        ref::batch_norm_forward_training(
            s, x.data<double>(), data_or_null<double>(gamma), data_or_null<double>(beta),
            double(eps), double(momentum), y.data<double>(), save_mean.data<double>(),
            save_invstd.data<double>(), data_or_null<double>(running_mean),
            data_or_null<double>(running_var), data_or_null<double>(num_batches_tracked));
      });
}

void batch_norm_forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean,
                                  const Tensor& running_var, float eps, Tensor& y,
                                  Tensor& save_mean, Tensor& save_invstd) {
  const std::string op = "batch_norm_forward_inference";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  check_inference_state(ctx, op, x, s, running_mean, running_var, save_mean, save_invstd, eps);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_forward_inference(
            s, x.data<T>(), data_or_null<float>(gamma), data_or_null<float>(beta),
            running_mean.data<float>(), running_var.data<float>(), eps, y.data<T>(),
            save_mean.data<float>(), save_invstd.data<float>(), stream);
      },
      [&] {
        cpu::batch_norm_forward_inference(
            s, x.data<float>(), data_or_null<float>(gamma), data_or_null<float>(beta),
            running_mean.data<float>(), running_var.data<float>(), eps, y.data<float>(),
            save_mean.data<float>(), save_invstd.data<float>(), ctx.num_threads());
      },
      [&] {
        ref::batch_norm_forward_inference(s, x.data<double>(), data_or_null<double>(gamma),
                                          data_or_null<double>(beta), running_mean.data<double>(),
                                          running_var.data<double>(), double(eps), y.data<double>(),
                                          save_mean.data<double>(), save_invstd.data<double>());
      });
}

void batch_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, bool batch_stats,
                         Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "batch_norm_backward";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = param_dtype(x);
  check_tensor(ctx, op, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, op, "dy", dy, x.shape(), x.dtype());
  check_layout(op, "dy", dy, layout_of(x));
  check_like_x(ctx, op, "dx", dx, x);
  check_optional(ctx, op, "gamma", gamma, {s.C}, dtype);
  check_tensors(ctx, op, {s.C}, dtype, {{"save_mean", save_mean}, {"save_invstd", save_invstd}});
  check_optional(ctx, op, "dgamma", dgamma, {s.C}, dtype);
  check_optional(ctx, op, "dbeta", dbeta, {s.C}, dtype);
  check_channel_size(ctx, op, s);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_backward(s, x.data<T>(), dy.data<T>(), data_or_null<float>(gamma),
                                  save_mean.data<float>(), save_invstd.data<float>(), batch_stats,
                                  data_or_null<T>(dx), data_or_null<float>(dgamma),
                                  data_or_null<float>(dbeta), cuda_workspace(ctx, s),
                                  cuda::batch_norm_version_for(s), stream);
      },
      [&] {
        cpu::batch_norm_backward(s, x.data<float>(), dy.data<float>(), data_or_null<float>(gamma),
                                 save_mean.data<float>(), save_invstd.data<float>(), batch_stats,
                                 data_or_null<float>(dx), data_or_null<float>(dgamma),
                                 data_or_null<float>(dbeta), ctx.num_threads());
      },
      [&] {
        ref::batch_norm_backward(s, x.data<double>(), dy.data<double>(),
                                 data_or_null<double>(gamma), save_mean.data<double>(),
                                 save_invstd.data<double>(), batch_stats, data_or_null<double>(dx),
                                 data_or_null<double>(dgamma), data_or_null<double>(dbeta));
      });
}

void batch_norm_relu_forward_training(Context& ctx, const Tensor& x, const Tensor& r,
                                      const Tensor& gamma, const Tensor& beta, float eps,
                                      float momentum, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                      Tensor& save_invstd, Tensor& running_mean,
                                      Tensor& running_var, Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_relu_forward_training";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  check_like_x(ctx, op, "r", r, x);
  check_like_x(ctx, op, "x_copy", x_copy, x);
  check_training_state(ctx, op, x, s, save_mean, save_invstd, running_mean, running_var,
                       num_batches_tracked, eps, momentum);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_relu_forward_training(
            s, x.data<T>(), data_or_null<T>(r), data_or_null<float>(gamma),
            data_or_null<float>(beta), eps, momentum, y.data<T>(), data_or_null<T>(x_copy),
            save_mean.data<float>(), save_invstd.data<float>(), data_or_null<float>(running_mean),
            data_or_null<float>(running_var), data_or_null<float>(num_batches_tracked),
            cuda_workspace(ctx, s), cuda::batch_norm_version_for(s), stream);
      },
      [&] {
        cpu::batch_norm_relu_forward_training(
            s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
            data_or_null<float>(beta), eps, momentum, y.data<float>(), data_or_null<float>(x_copy),
            save_mean.data<float>(), save_invstd.data<float>(), data_or_null<float>(running_mean),
            data_or_null<float>(running_var), data_or_null<float>(num_batches_tracked),
            ctx.num_threads());
      },
      [&] {
        ref::batch_norm_relu_forward_training(
            s, x.data<double>(), data_or_null<double>(r), data_or_null<double>(gamma),
            data_or_null<double>(beta), double(eps), double(momentum), y.data<double>(),
            data_or_null<double>(x_copy), save_mean.data<double>(), save_invstd.data<double>(),
            data_or_null<double>(running_mean), data_or_null<double>(running_var),
            data_or_null<double>(num_batches_tracked));
      });
}

void batch_norm_relu_forward_inference(Context& ctx, const Tensor& x, const Tensor& r,
                                       const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var,
                                       float eps, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                       Tensor& save_invstd) {
  const std::string op = "batch_norm_relu_forward_inference";
  const BatchNormShape s = check_forward(ctx, op, x, y, gamma, beta);
  check_like_x(ctx, op, "r", r, x);
  check_like_x(ctx, op, "x_copy", x_copy, x);
  check_inference_state(ctx, op, x, s, running_mean, running_var, save_mean, save_invstd, eps);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_relu_forward_inference(
            s, x.data<T>(), data_or_null<T>(r), data_or_null<float>(gamma),
            data_or_null<float>(beta), running_mean.data<float>(), running_var.data<float>(), eps,
            y.data<T>(), data_or_null<T>(x_copy), save_mean.data<float>(),
            save_invstd.data<float>(), stream);
      },
      [&] {
        cpu::batch_norm_relu_forward_inference(
            s, x.data<float>(), data_or_null<float>(r), data_or_null<float>(gamma),
            data_or_null<float>(beta), running_mean.data<float>(), running_var.data<float>(), eps,
            y.data<float>(), data_or_null<float>(x_copy), save_mean.data<float>(),
            save_invstd.data<float>(), ctx.num_threads());
      },
      [&] {
        ref::batch_norm_relu_forward_inference(
            s, x.data<double>(), data_or_null<double>(r), data_or_null<double>(gamma),
            data_or_null<double>(beta), running_mean.data<double>(), running_var.data<double>(),
            double(eps), y.data<double>(), data_or_null<double>(x_copy), save_mean.data<double>(),
            save_invstd.data<double>());
      });
}

void batch_norm_relu_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                              const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                              const Tensor& save_invstd, bool batch_stats, Tensor& dx, Tensor& dr,
                              Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "batch_norm_relu_backward";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = param_dtype(x);
  check_tensor(ctx, op, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, op, "dy", dy, x.shape(), x.dtype());
  check_layout(op, "dy", dy, layout_of(x));
  check_like_x(ctx, op, "y", y, x);
  check_like_x(ctx, op, "dx", dx, x);
  check_like_x(ctx, op, "dr", dr, x);
  if (dr.defined() && !y.defined()) {
    throw Error(op + ": dr is given but y is not (the form with a residual masks by y)");
  }
  check_optional(ctx, op, "gamma", gamma, {s.C}, dtype);
  check_optional(ctx, op, "beta", beta, {s.C}, dtype);
  check_tensors(ctx, op, {s.C}, dtype, {{"save_mean", save_mean}, {"save_invstd", save_invstd}});
  check_optional(ctx, op, "dgamma", dgamma, {s.C}, dtype);
  check_optional(ctx, op, "dbeta", dbeta, {s.C}, dtype);
  check_channel_size(ctx, op, s);
  run(
      ctx, op, x,
      [&](auto element, auto stream) {
        using T = decltype(element);
        cuda::batch_norm_relu_backward(
            s, x.data<T>(), data_or_null<T>(y), dy.data<T>(), data_or_null<float>(gamma),
            data_or_null<float>(beta), save_mean.data<float>(), save_invstd.data<float>(),
            batch_stats, data_or_null<T>(dx), data_or_null<T>(dr), data_or_null<float>(dgamma),
            data_or_null<float>(dbeta), cuda_workspace(ctx, s), cuda::batch_norm_version_for(s),
            stream);
      },
      [&] {
        cpu::batch_norm_relu_backward(s, x.data<float>(), data_or_null<float>(y), dy.data<float>(),
                                      data_or_null<float>(gamma), data_or_null<float>(beta),
                                      save_mean.data<float>(), save_invstd.data<float>(),
                                      batch_stats, data_or_null<float>(dx), data_or_null<float>(dr),
                                      data_or_null<float>(dgamma), data_or_null<float>(dbeta),
                                      ctx.num_threads());
      },
      [&] {
        ref::batch_norm_relu_backward(
            s, x.data<double>(), data_or_null<double>(y), dy.data<double>(),
            data_or_null<double>(gamma), data_or_null<double>(beta), save_mean.data<double>(),
            save_invstd.data<double>(), batch_stats, data_or_null<double>(dx),
            data_or_null<double>(dr), data_or_null<double>(dgamma), data_or_null<double>(dbeta));
      });
}

}  // namespace crema::kernels
