// Layer normalization, dispatch: checks the tensors, the axis and eps once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference).
#include "kernels/layer_norm/layer_norm.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t outer, C, inner;
};

Geometry geometry_of(const std::string& op, const Tensor& x, int axis) {
  if (axis < 0 || axis >= x.ndim()) {
    throw Error(op + ": axis " + std::to_string(axis) + " is not an axis of " + x.description());
  }
  return {shape_count(x.shape(), 0, axis), x.dim(axis), shape_count(x.shape(), axis + 1, x.ndim())};
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
  if (weight != nullptr) check_numel(ctx, op, "weight", *weight, g.C, "channel", dtype);
  if (bias != nullptr) check_numel(ctx, op, "bias", *bias, g.C, "channel", dtype);
  check_numel(ctx, op, "mean", mean, g.outer * g.inner, "position", dtype);
  check_numel(ctx, op, "rstd", rstd, g.outer * g.inner, "position", dtype);
}

}  // namespace

void layer_norm_forward(Context& ctx, const Tensor& x, const Tensor* weight, const Tensor* bias,
                        int axis, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const std::string op = "layer_norm_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  const Geometry g = geometry_of(op, x, axis);
  check_statistics(ctx, op, g, dtype, weight, bias, mean, rstd);
  if (!(eps > 0.0f && std::isfinite(eps))) {
    throw Error(op + ": eps " + std::to_string(eps) + " must be positive and finite");
  }
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::layer_norm_forward(g.outer, g.C, g.inner, x.data<float>(),
                                              data_or_null<float>(weight),
                                              data_or_null<float>(bias), eps, y.data<float>(),
                                              mean.data<float>(), rstd.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::layer_norm_forward(g.outer, g.C, g.inner, x.data<float>(),
                                            data_or_null<float>(weight), data_or_null<float>(bias),
                                            eps, y.data<float>(), mean.data<float>(),
                                            rstd.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::layer_norm_forward(g.outer, g.C, g.inner, x.data<double>(),
                                     data_or_null<double>(weight), data_or_null<double>(bias), eps,
                                     y.data<double>(), mean.data<double>(), rstd.data<double>());
           }));
}

void layer_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor* weight,
                         const Tensor& mean, const Tensor& rstd, int axis, Tensor& dx,
                         Tensor* xhat) {
  const std::string op = "layer_norm_backward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}, {"dx", dx}});
  if (xhat != nullptr) check_tensor(ctx, op, "xhat", *xhat, x.shape(), dtype);
  const Geometry g = geometry_of(op, x, axis);
  check_statistics(ctx, op, g, dtype, weight, nullptr, mean, rstd);
  dispatch(ctx, op.c_str(), dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::layer_norm_backward(g.outer, g.C, g.inner, x.data<float>(),
                                               dy.data<float>(), data_or_null<float>(weight),
                                               mean.data<float>(), rstd.data<float>(),
                                               dx.data<float>(), data_or_null<float>(xhat), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::layer_norm_backward(
                        g.outer, g.C, g.inner, x.data<float>(), dy.data<float>(),
                        data_or_null<float>(weight), mean.data<float>(), rstd.data<float>(),
                        dx.data<float>(), data_or_null<float>(xhat), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::layer_norm_backward(g.outer, g.C, g.inner, x.data<double>(), dy.data<double>(),
                                      data_or_null<double>(weight), mean.data<double>(),
                                      rstd.data<double>(), dx.data<double>(),
                                      data_or_null<double>(xhat));
           }));
}

}  // namespace crema::kernels
