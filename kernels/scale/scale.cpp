// Scale and bias, dispatch: checks the tensors and the channel axes once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU: the
// reference), in either layout: the kernels see memory as `batch` entries of [outer, C, inner],
// which for the channels of an nhwc tensor is one [N*H*W, C, 1], and for a scale per (n, c) of
// an nhwc tensor (squeeze-excitation's gate) N of [H*W, C, 1].
#include "kernels/scale/scale.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t batch, outer, C, inner;  // C: the channels of one batch entry
};

Geometry channel_geometry(const char* op, const Tensor& x, int axis, int num_axes) {
  if (axis < 0 || num_axes < 0 || axis + num_axes > x.ndim()) {
    throw Error(std::string(op) + ": axes [" + std::to_string(axis) + ", " +
                std::to_string(axis + num_axes) + ") do not lie within " + x.description());
  }
  if (x.ndim() == 4 && x.layout() == Layout::nhwc) {
    if (num_axes == 0) return {1, 1, 1, x.numel()};  // one scale for every element
    if (axis == 1 && num_axes == 1) return {1, x.dim(0) * x.dim(2) * x.dim(3), x.dim(1), 1};
    if (axis == 0 && num_axes == 2) return {x.dim(0), x.dim(2) * x.dim(3), x.dim(1), 1};
    throw Error(std::string(op) + ": " + x.description() +
                " is stored nhwc, which runs the channels (axes [1, 2)) or a scale per (n, c) "
                "(axes [0, 2)), not axes [" +
                std::to_string(axis) + ", " + std::to_string(axis + num_axes) + ")");
  }
  return {1, shape_count(x.shape(), 0, axis), shape_count(x.shape(), axis, axis + num_axes),
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

// A scale or sum tensor beside `dtype` tensors: param_dtype's, or (16-bit x: a second bottom and
// its gradient) x's own.
DType operand_dtype(const Tensor* t, DType dtype) {
  return t != nullptr && t->dtype() == dtype ? dtype : param_dtype(dtype);
}

// Runs cpu(b, offset into x, offset into the channels) for each batch entry (the CPU kernels
// take one [outer, C, inner] at a time).
template <class Run>
void per_entry(const Geometry& g, Run run) {
  for (int64_t b = 0; b < g.batch; ++b) run(b * g.outer * g.C * g.inner, b * g.C);
}

template <class T>
const T* at(const T* p, int64_t offset) {
  return p != nullptr ? p + offset : nullptr;
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
  const int64_t channels = g.batch * g.C;
  const DType sdtype = operand_dtype(scale, dtype);
  if (scale != nullptr) check_numel(ctx, op, "scale", *scale, channels, "channel", sdtype);
  if (bias != nullptr) check_numel(ctx, op, "bias", *bias, channels, "channel", param_dtype(dtype));
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    const float* b = data_or_null<float>(bias);
    if (scale != nullptr && scale->dtype() == dtype) {
      cuda::scale_forward(g.batch, g.outer, g.C, g.inner, x.data<T>(), scale->data<T>(), b,
                          y.data<T>(), stream);
    } else {
      cuda::scale_forward(g.batch, g.outer, g.C, g.inner, x.data<T>(), data_or_null<float>(scale),
                          b, y.data<T>(), stream);
    }
  };
  const auto cpu_f32 = [&] {
    per_entry(g, [&](int64_t e, int64_t c) {
      cpu::scale_forward(g.outer, g.C, g.inner, x.data<float>() + e,
                         at(data_or_null<float>(scale), c), at(data_or_null<float>(bias), c),
                         y.data<float>() + e, ctx.num_threads());
    });
  };
  const auto cpu_f64 = [&] {
    per_entry(g, [&](int64_t e, int64_t c) {
      ref::scale_forward(g.outer, g.C, g.inner, x.data<double>() + e,
                         at(data_or_null<double>(scale), c), at(data_or_null<double>(bias), c),
                         y.data<double>() + e);
    });
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
  check_numel(ctx, op, "out", out, g.batch * g.C, "channel", operand_dtype(&out, dtype));
  if (x != nullptr && layout_of(*x) != layout_of(dy)) {
    throw Error(std::string(op) + ": x " + x->description() + " and dy " + dy.description() +
                " are stored in different layouts");
  }
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    const auto version = cuda::ReduceVersion::best;
    void* workspace = workspace_for(
        ctx, cuda::channel_reduce_workspace_bytes(g.batch, g.outer, g.C, g.inner, version));
    if (out.dtype() == dtype) {
      cuda::channel_reduce(g.batch, g.outer, g.C, g.inner, dy.data<T>(), data_or_null<T>(x),
                           accumulate, out.data<T>(), workspace, version, stream);
    } else {
      cuda::channel_reduce(g.batch, g.outer, g.C, g.inner, dy.data<T>(), data_or_null<T>(x),
                           accumulate, out.data<float>(), workspace, version, stream);
    }
  };
  const auto cpu_f32 = [&] {
    per_entry(g, [&](int64_t e, int64_t c) {
      cpu::channel_reduce(g.outer, g.C, g.inner, dy.data<float>() + e,
                          at(data_or_null<float>(x), e), accumulate, out.data<float>() + c,
                          ctx.num_threads());
    });
  };
  const auto cpu_f64 = [&] {
    per_entry(g, [&](int64_t e, int64_t c) {
      ref::channel_reduce(g.outer, g.C, g.inner, dy.data<double>() + e,
                          at(data_or_null<double>(x), e), accumulate, out.data<double>() + c);
    });
  };
  const Layout layout = layout_of(dy);
  dispatch(ctx, op, dtype, layout, on_cuda_typed<float>(gpu, layout),
           on_cuda_typed<bf16_t>(gpu, layout), on_cuda_typed<f16_t>(gpu, layout),
           on_cpu(DType::f32, cpu_f32, layout), on_cpu(DType::f64, cpu_f64, layout));
}

}  // namespace crema::kernels
