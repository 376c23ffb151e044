// Scale and bias, dispatch: checks the tensors and the channel axes once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference).
#include "kernels/scale/scale.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t outer, C, inner;
};

Geometry channel_geometry(const char* op, const Tensor& x, int axis, int num_axes) {
  if (axis < 0 || num_axes < 0 || axis + num_axes > x.ndim()) {
    throw Error(std::string(op) + ": axes [" + std::to_string(axis) + ", " +
                std::to_string(axis + num_axes) + ") do not lie within " + x.description());
  }
  return {shape_count(x.shape(), 0, axis), shape_count(x.shape(), axis, axis + num_axes),
          shape_count(x.shape(), axis + num_axes, x.ndim())};
}

// The elements of an optional tensor, or null.
template <class T>
const T* data_or_null(const Tensor* t) {
  return t != nullptr ? t->data<T>() : nullptr;
}

}  // namespace

void scale_forward(Context& ctx, const Tensor& x, const Tensor* scale, const Tensor* bias, int axis,
                   int num_axes, Tensor& y) {
  const char* op = "scale_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  const Geometry g = channel_geometry(op, x, axis, num_axes);
  if (scale != nullptr) check_numel(ctx, op, "scale", *scale, g.C, "channel", dtype);
  if (bias != nullptr) check_numel(ctx, op, "bias", *bias, g.C, "channel", dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::scale_forward(g.outer, g.C, g.inner, x.data<float>(),
                                         data_or_null<float>(scale), data_or_null<float>(bias),
                                         y.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::scale_forward(g.outer, g.C, g.inner, x.data<float>(),
                                       data_or_null<float>(scale), data_or_null<float>(bias),
                                       y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::scale_forward(g.outer, g.C, g.inner, x.data<double>(),
                                data_or_null<double>(scale), data_or_null<double>(bias),
                                y.data<double>());
           }));
}

void channel_reduce(Context& ctx, const Tensor& dy, const Tensor* x, int axis, int num_axes,
                    bool accumulate, Tensor& out) {
  const char* op = "channel_reduce";
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, dy.shape(), dtype);
  if (x != nullptr) check_tensor(ctx, op, "x", *x, dy.shape(), dtype);
  const Geometry g = channel_geometry(op, dy, axis, num_axes);
  check_numel(ctx, op, "out", out, g.C, "channel", dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const auto version = cuda::ReduceVersion::best;
                     void* workspace = workspace_for(
                         ctx, cuda::channel_reduce_workspace_bytes(g.outer, g.C, g.inner, version));
                     cuda::channel_reduce(g.outer, g.C, g.inner, dy.data<float>(),
                                          data_or_null<float>(x), accumulate, out.data<float>(),
                                          workspace, version, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::channel_reduce(g.outer, g.C, g.inner, dy.data<float>(),
                                        data_or_null<float>(x), accumulate, out.data<float>(),
                                        ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::channel_reduce(g.outer, g.C, g.inner, dy.data<double>(), data_or_null<double>(x),
                                 accumulate, out.data<double>());
           }));
}

}  // namespace crema::kernels
