// Layer normalization, dispatch: checks the tensors, the axis and eps once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU: the
// reference), in either layout (the kernels see memory as [outer, C, inner]).
#include "kernels/layer_norm/layer_norm.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"
#include "kernels/scale/scale.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t outer, C, inner;
};

// x as [outer, C, inner] in memory, C its extent along `axis`: the axes before and after `axis`
// in memory order (a 4-D nhwc tensor orders its logical axes n, h, w, c).
Geometry geometry_of(const std::string& op, const Tensor& x, int axis) {
  if (axis < 0 || axis >= x.ndim()) {
    throw Error(op + ": axis " + std::to_string(axis) + " is not an axis of " + x.description());
  }
  if (x.ndim() == 4 && x.layout() == Layout::nhwc) {
    const int memory_order[4] = {0, 2, 3, 1};
    Geometry g{1, x.dim(axis), 1};
    bool before = true;
    for (int a : memory_order) {
      if (a == axis) {
        before = false;
      } else {
        (before ? g.outer : g.inner) *= x.dim(a);
      }
    }
    return g;
  }
  return {shape_count(x.shape(), 0, axis), x.dim(axis), shape_count(x.shape(), axis + 1, x.ndim())};
}

// The layout the dispatch routes by: a 4-D tensor's, nchw for other ranks.
Layout layout_of(const Tensor& x) {
  return x.ndim() == 4 ? x.layout() : Layout::nchw;
}

// Statistics and parameters: float64 beside float64 tensors, float32 beside the others.
DType statistics_dtype(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

// The elements of an optional tensor, or null.
template <class T>
const T* data_or_null(const Tensor* t) {
  return t != nullptr ? t->data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor* t) {
  return t != nullptr ? t->data<T>() : nullptr;
}

// weight and bias of C elements (or null), mean and rstd of one element per position.
void check_statistics(const Context& ctx, const std::string& op, const Geometry& g, DType dtype,
                      const Tensor* weight, const Tensor* bias, const Tensor& mean,
                      const Tensor& rstd) {
  const DType s = statistics_dtype(dtype);
  if (weight != nullptr) check_numel(ctx, op, "weight", *weight, g.C, "channel", s);
  if (bias != nullptr) check_numel(ctx, op, "bias", *bias, g.C, "channel", s);
  check_numel(ctx, op, "mean", mean, g.outer * g.inner, "position", s);
  check_numel(ctx, op, "rstd", rstd, g.outer * g.inner, "position", s);
}

// The CPU backward (cpu:: for float, ref:: for double): dx and xhat into tensors of x's shape,
// then the parameter sums by channel_reduce of dy with xhat, accumulated. dx goes to scratch where
// the caller wants none, and where it would overwrite the dy the sums still read.
template <class T, class Backward, class Reduce>
void cpu_backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, Tensor* dweight,
                  Tensor* dbias, Backward backward, Reduce reduce) {
  const bool sums = dweight != nullptr || dbias != nullptr;
  const bool direct = dx != nullptr && !(sums && dx->shares_storage(dy));
  Tensor dx_scratch, xhat;
  if (!direct) dx_scratch = ctx.empty(x.shape(), x.dtype());
  if (dweight != nullptr) xhat = ctx.empty(x.shape(), x.dtype());
  T* h = dweight != nullptr ? xhat.data<T>() : nullptr;
  backward(direct ? dx->data<T>() : dx_scratch.data<T>(), h);
  if (dweight != nullptr) reduce(dy.data<T>(), h, dweight->data<T>());
  if (dbias != nullptr) reduce(dy.data<T>(), nullptr, dbias->data<T>());
  if (dx != nullptr && !direct) ctx.copy(*dx, dx_scratch);
}

}  // namespace

void layer_norm_forward(Context& ctx, const Tensor& x, const Tensor* weight, const Tensor* bias,
                        int axis, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const std::string op = "layer_norm_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  check_layout(op, "y", y, layout_of(x));
  const Geometry g = geometry_of(op, x, axis);
  check_statistics(ctx, op, g, dtype, weight, bias, mean, rstd);
  if (!(eps > 0.0f && std::isfinite(eps))) {
    throw Error(op + ": eps " + std::to_string(eps) + " must be positive and finite");
  }
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::layer_norm_forward(g.outer, g.C, g.inner, x.data<T>(), data_or_null<float>(weight),
                             data_or_null<float>(bias), eps, y.data<T>(), mean.data<float>(),
                             rstd.data<float>(), stream);
  };
  const auto cpu_f32 = [&] {
    cpu::layer_norm_forward(g.outer, g.C, g.inner, x.data<float>(), data_or_null<float>(weight),
                            data_or_null<float>(bias), eps, y.data<float>(), mean.data<float>(),
                            rstd.data<float>(), ctx.num_threads());
  };
  const auto cpu_f64 = [&] {
    ref::layer_norm_forward(g.outer, g.C, g.inner, x.data<double>(), data_or_null<double>(weight),
                            data_or_null<double>(bias), eps, y.data<double>(), mean.data<double>(),
                            rstd.data<double>());
  };
  const Layout l = layout_of(x);
  dispatch(ctx, op.c_str(), dtype, l, on_cuda_typed<float>(gpu, l), on_cuda_typed<bf16_t>(gpu, l),
           on_cuda_typed<f16_t>(gpu, l), on_cpu(DType::f32, cpu_f32, l),
           on_cpu(DType::f64, cpu_f64, l));
}

void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor* weight,
                         const Tensor& mean, const Tensor& rstd, int axis, Tensor* dx,
                         Tensor* dweight, Tensor* dbias) {
  const std::string op = "layer_norm_backward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  check_layout(op, "dy", dy, layout_of(x));
  if (dx != nullptr) {
    check_tensor(ctx, op, "dx", *dx, x.shape(), dtype);
    check_layout(op, "dx", *dx, layout_of(x));
  }
  const Geometry g = geometry_of(op, x, axis);
  check_statistics(ctx, op, g, dtype, weight, nullptr, mean, rstd);
  const DType s = statistics_dtype(dtype);
  if (dweight != nullptr) check_numel(ctx, op, "dweight", *dweight, g.C, "channel", s);
  if (dbias != nullptr) check_numel(ctx, op, "dbias", *dbias, g.C, "channel", s);
  if (dx == nullptr && dweight == nullptr && dbias == nullptr) return;
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    const bool sums = dweight != nullptr || dbias != nullptr;
    void* workspace = sums ? workspace_for(ctx, cuda::layer_norm_backward_workspace_bytes<T>(
                                                    g.outer, g.C, g.inner))
                           : nullptr;
    cuda::layer_norm_backward(g.outer, g.C, g.inner, x.data<T>(), dy.data<T>(),
                              data_or_null<float>(weight), mean.data<float>(), rstd.data<float>(),
                              data_or_null<T>(dx), data_or_null<float>(dweight),
                              data_or_null<float>(dbias), workspace, stream);
  };
  const auto cpu_f32 = [&] {
    cpu_backward<float>(
        ctx, x, dy, dx, dweight, dbias,
        [&](float* d, float* h) {
          cpu::layer_norm_backward(g.outer, g.C, g.inner, x.data<float>(), dy.data<float>(),
                                   data_or_null<float>(weight), mean.data<float>(),
                                   rstd.data<float>(), d, h, ctx.num_threads());
        },
        [&](const float* d, const float* h, float* out) {
          cpu::channel_reduce(g.outer, g.C, g.inner, d, h, true, out, ctx.num_threads());
        });
  };
  const auto cpu_f64 = [&] {
    cpu_backward<double>(
        ctx, x, dy, dx, dweight, dbias,
        [&](double* d, double* h) {
          ref::layer_norm_backward(g.outer, g.C, g.inner, x.data<double>(), dy.data<double>(),
                                   data_or_null<double>(weight), mean.data<double>(),
                                   rstd.data<double>(), d, h);
        },
        [&](const double* d, const double* h, double* out) {
          ref::channel_reduce(g.outer, g.C, g.inner, d, h, true, out);
        });
  };
  const Layout l = layout_of(x);
  dispatch(ctx, op.c_str(), dtype, l, on_cuda_typed<float>(gpu, l), on_cuda_typed<bf16_t>(gpu, l),
           on_cuda_typed<f16_t>(gpu, l), on_cpu(DType::f32, cpu_f32, l),
           on_cpu(DType::f64, cpu_f64, l));
}

}  // namespace crema::kernels
