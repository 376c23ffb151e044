// Scale and bias, dispatch: checks the tensors and the channel axes once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU: the
// reference), in either layout: the kernels see memory as [outer, C, inner], which for the
// channels of an nhwc tensor is [N*H*W, C, 1].
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
  if (x.ndim() == 4 && x.layout() == Layout::nhwc) {
    if (axis != 1 || num_axes != 1) {
      throw Error(std::string(op) + ": " + x.description() +
                  " is stored nhwc, which runs the channels (axis 1, one axis) only, not axes [" +
                  std::to_string(axis) + ", " + std::to_string(axis + num_axes) + ")");
    }
    return {x.dim(0) * x.dim(2) * x.dim(3), x.dim(1), 1};
  }
  return {shape_count(x.shape(), 0, axis), shape_count(x.shape(), axis, axis + num_axes),
          shape_count(x.shape(), axis + num_axes, x.ndim())};
}

// The elements of an optional tensor, or null.
template <class T>
const T* data_or_null(const Tensor* t) {
  return t != nullptr ? t->data<T>() : nullptr;
}

// Scale, bias and sums: float64 beside float64 tensors, float32 beside the others.
DType param_dtype(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

// The layout the dispatch routes by: a 4-D tensor's, nchw for other ranks.
Layout layout_of(const Tensor& x) {
  return x.ndim() == 4 ? x.layout() : Layout::nchw;
}

}  // namespace

void scale_forward(Context& ctx, const Tensor& x, const Tensor* scale, const Tensor* bias, int axis,
                   int num_axes, Tensor& y) {
  const char* op = "scale_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  const Geometry g = channel_geometry(op, x, axis, num_axes);
  const DType pdtype = param_dtype(dtype);
  if (scale != nullptr) check_numel(ctx, op, "scale", *scale, g.C, "channel", pdtype);
  if (bias != nullptr) check_numel(ctx, op, "bias", *bias, g.C, "channel", pdtype);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::scale_forward(g.outer, g.C, g.inner, x.data<T>(), data_or_null<float>(scale),
                        data_or_null<float>(bias), y.data<T>(), stream);
  };
  const auto cpu_f32 = [&] {
    cpu::scale_forward(g.outer, g.C, g.inner, x.data<float>(), data_or_null<float>(scale),
                       data_or_null<float>(bias), y.data<float>(), ctx.num_threads());
  };
  const auto cpu_f64 = [&] {
    ref::scale_forward(g.outer, g.C, g.inner, x.data<double>(), data_or_null<double>(scale),
                       data_or_null<double>(bias), y.data<double>());
  };
  dispatch(ctx, op, dtype, layout_of(x), on_cuda_typed<float>(gpu, layout_of(x)),
           on_cuda_typed<bf16_t>(gpu, layout_of(x)), on_cuda_typed<f16_t>(gpu, layout_of(x)),
           on_cpu(DType::f32, cpu_f32, layout_of(x)), on_cpu(DType::f64, cpu_f64, layout_of(x)));
}

void channel_reduce(Context& ctx, const Tensor& dy, const Tensor* x, int axis, int num_axes,
                    bool accumulate, Tensor& out) {
  const char* op = "channel_reduce";
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, dy.shape(), dtype);
  if (x != nullptr) check_tensor(ctx, op, "x", *x, dy.shape(), dtype);
  const Geometry g = channel_geometry(op, dy, axis, num_axes);
  check_numel(ctx, op, "out", out, g.C, "channel", param_dtype(dtype));
  if (x != nullptr && layout_of(*x) != layout_of(dy)) {
    throw Error(std::string(op) + ": x " + x->description() + " and dy " + dy.description() +
                " are stored in different layouts");
  }
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    const auto version = cuda::ReduceVersion::best;
    void* workspace =
        workspace_for(ctx, cuda::channel_reduce_workspace_bytes(g.outer, g.C, g.inner, version));
    cuda::channel_reduce(g.outer, g.C, g.inner, dy.data<T>(), data_or_null<T>(x), accumulate,
                         out.data<float>(), workspace, version, stream);
  };
  const auto cpu_f32 = [&] {
    cpu::channel_reduce(g.outer, g.C, g.inner, dy.data<float>(), data_or_null<float>(x), accumulate,
                        out.data<float>(), ctx.num_threads());
  };
  const auto cpu_f64 = [&] {
    ref::channel_reduce(g.outer, g.C, g.inner, dy.data<double>(), data_or_null<double>(x),
                        accumulate, out.data<double>());
  };
  const Layout layout = layout_of(dy);
  dispatch(ctx, op, dtype, layout, on_cuda_typed<float>(gpu, layout),
           on_cuda_typed<bf16_t>(gpu, layout), on_cuda_typed<f16_t>(gpu, layout),
           on_cpu(DType::f32, cpu_f32, layout), on_cpu(DType::f64, cpu_f64, layout));
}

}  // namespace crema::kernels
