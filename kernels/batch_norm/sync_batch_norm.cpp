// Synchronized batch normalization, dispatch: checks the tensors once, then runs cuda:: (float32)
// or ref:: (float32 and float64 on the CPU). Optional tensors are undefined Tensors here and null
// pointers below.
#include "kernels/batch_norm/sync_batch_norm.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

BatchNormShape shape_of(const std::string& op, const Tensor& x) {
  if (!x.defined() || x.ndim() < 2) {
    throw Error(op + ": x is " + (x.defined() ? x.description() : std::string("undefined")) +
                ", expected at least 2 axes [N, C, ...]");
  }
  return batch_norm_shape(x.shape());
}

// sums: [per-channel first sums, per-channel second sums, M] in double.
void check_sums(const Context& ctx, const std::string& op, const char* name, const Tensor& sums,
                int64_t C) {
  check_tensor(ctx, op, name, sums, {2 * C + 1}, DType::f64);
}

void check_optional(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                    int64_t C, DType dtype) {
  if (t.defined()) check_tensor(ctx, op, name, t, {C}, dtype);
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void batch_norm_channel_sums(Context& ctx, const Tensor& x, Tensor& sums) {
  const std::string op = "batch_norm_channel_sums";
  const BatchNormShape s = shape_of(op, x);
  check_sums(ctx, op, "sums", sums, s.C);
  dispatch(ctx, op.c_str(), x.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::batch_norm_channel_sums(s, x.data<float>(), sums.data<double>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] { ref::batch_norm_channel_sums(s, x.data<float>(), sums.data<double>()); }),
           on_cpu(DType::f64,
                  [&] { ref::batch_norm_channel_sums(s, x.data<double>(), sums.data<double>()); }));
}

void batch_norm_gradient_sums(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& mean,
                              const Tensor& invstd, Tensor& sums) {
  const std::string op = "batch_norm_gradient_sums";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  check_tensors(ctx, op, {s.C}, dtype, {{"mean", mean}, {"invstd", invstd}});
  check_sums(ctx, op, "sums", sums, s.C);
  auto run = [&](auto element) {
    using T = decltype(element);
    ref::batch_norm_gradient_sums(s, x.data<T>(), dy.data<T>(), mean.data<T>(), invstd.data<T>(),
                                  sums.data<double>());
  };
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::batch_norm_gradient_sums(s, x.data<float>(), dy.data<float>(),
                                                    mean.data<float>(), invstd.data<float>(),
                                                    sums.data<double>(), stream);
                   }),
           on_cpu(DType::f32, [&] { run(float{}); }), on_cpu(DType::f64, [&] { run(double{}); }));
}

void batch_norm_statistics(Context& ctx, const Tensor& sums, float momentum, Tensor& mean,
                           Tensor& var, Tensor& running_mean, Tensor& running_var,
                           Tensor& num_batches_tracked) {
  const std::string op = "batch_norm_statistics";
  if (!sums.defined() || sums.ndim() != 1 || sums.numel() % 2 != 1) {
    throw Error(op + ": sums is " +
                (sums.defined() ? sums.description() : std::string("undefined")) +
                ", expected f64[2 * C + 1]");
  }
  const int64_t C = sums.numel() / 2;
  check_sums(ctx, op, "sums", sums, C);
  const DType dtype = mean.dtype();
  check_tensors(ctx, op, {C}, dtype, {{"mean", mean}, {"var", var}});
  check_optional(ctx, op, "running_mean", running_mean, C, dtype);
  check_optional(ctx, op, "running_var", running_var, C, dtype);
  if (num_batches_tracked.defined()) {
    check_scalar(ctx, op, "num_batches_tracked", num_batches_tracked, dtype);
  }
  if (!(momentum >= 0.0f && momentum <= 1.0f)) {
    throw Error(op + ": momentum " + std::to_string(momentum) + " must be in [0, 1]");
  }
  auto run = [&](auto element) {
    using T = decltype(element);
    ref::batch_norm_statistics(C, sums.data<double>(), T(momentum), mean.data<T>(), var.data<T>(),
                               data_or_null<T>(running_mean), data_or_null<T>(running_var),
                               data_or_null<T>(num_batches_tracked));
  };
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::batch_norm_statistics(
                         C, sums.data<double>(), momentum, mean.data<float>(), var.data<float>(),
                         data_or_null<float>(running_mean), data_or_null<float>(running_var),
                         data_or_null<float>(num_batches_tracked), stream);
                   }),
           on_cpu(DType::f32, [&] { run(float{}); }), on_cpu(DType::f64, [&] { run(double{}); }));
}

void sync_batch_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& mean, const Tensor& invstd, const Tensor& local,
                              const Tensor& global, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const std::string op = "sync_batch_norm_backward";
  const BatchNormShape s = shape_of(op, x);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  if (dx.defined()) check_tensor(ctx, op, "dx", dx, x.shape(), dtype);
  check_tensors(ctx, op, {s.C}, dtype, {{"mean", mean}, {"invstd", invstd}});
  check_optional(ctx, op, "gamma", gamma, s.C, dtype);
  check_optional(ctx, op, "dgamma", dgamma, s.C, dtype);
  check_optional(ctx, op, "dbeta", dbeta, s.C, dtype);
  check_sums(ctx, op, "local", local, s.C);
  check_sums(ctx, op, "global", global, s.C);
  auto run = [&](auto element) {
    using T = decltype(element);
    ref::sync_batch_norm_backward(s, x.data<T>(), dy.data<T>(), data_or_null<T>(gamma),
                                  mean.data<T>(), invstd.data<T>(), local.data<double>(),
                                  global.data<double>(), data_or_null<T>(dx),
                                  data_or_null<T>(dgamma), data_or_null<T>(dbeta));
  };
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::sync_batch_norm_backward(
                         s, x.data<float>(), dy.data<float>(), data_or_null<float>(gamma),
                         mean.data<float>(), invstd.data<float>(), local.data<double>(),
                         global.data<double>(), data_or_null<float>(dx),
                         data_or_null<float>(dgamma), data_or_null<float>(dbeta), stream);
                   }),
           on_cpu(DType::f32, [&] { run(float{}); }), on_cpu(DType::f64, [&] { run(double{}); }));
}

}  // namespace crema::kernels
