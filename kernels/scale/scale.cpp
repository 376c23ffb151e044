// Scale and bias, dispatch: checks the tensors and the channel axes once, then runs the CPU or
// the CUDA path.
#include "kernels/scale/scale.h"

#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

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

// A per-channel tensor: float32, C elements of any shape, on the context's device.
void check_channels(const Context& ctx, const char* op, const char* name, const Tensor& t,
                    int64_t C) {
  check_tensor(ctx, op, name, t, t.shape());
  if (t.numel() != C) {
    throw Error(std::string(op) + ": " + name + " is " + t.description() + ", expected " +
                std::to_string(C) + " elements (one per channel)");
  }
}

}  // namespace

void scale_forward(Context& ctx, const Tensor& x, const Tensor* scale, const Tensor* bias, int axis,
                   int num_axes, Tensor& y) {
  const char* op = "scale_forward";
  check_tensor(ctx, op, "x", x, x.shape());
  check_tensor(ctx, op, "y", y, x.shape());
  const Geometry g = channel_geometry(op, x, axis, num_axes);
  if (scale != nullptr) check_channels(ctx, op, "scale", *scale, g.C);
  if (bias != nullptr) check_channels(ctx, op, "bias", *bias, g.C);
  const float* s = scale ? scale->data<float>() : nullptr;
  const float* b = bias ? bias->data<float>() : nullptr;
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::scale_forward(g.outer, g.C, g.inner, x.data<float>(), s, b, y.data<float>(),
                        ctx.stream());
    return;
  }
#endif
  cpu::scale_forward(g.outer, g.C, g.inner, x.data<float>(), s, b, y.data<float>(),
                     ctx.num_threads());
}

void channel_reduce(Context& ctx, const Tensor& dy, const Tensor* x, int axis, int num_axes,
                    bool accumulate, Tensor& out) {
  const char* op = "channel_reduce";
  check_tensor(ctx, op, "dy", dy, dy.shape());
  if (x != nullptr) check_tensor(ctx, op, "x", *x, dy.shape());
  const Geometry g = channel_geometry(op, dy, axis, num_axes);
  check_channels(ctx, op, "out", out, g.C);
  const float* xp = x ? x->data<float>() : nullptr;
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const auto version = cuda::ReduceVersion::best;
    const size_t bytes = cuda::channel_reduce_workspace_bytes(g.outer, g.C, g.inner, version);
    float* workspace =
        bytes > 0 ? ctx.workspace((bytes + sizeof(float) - 1) / sizeof(float)) : nullptr;
    cuda::channel_reduce(g.outer, g.C, g.inner, dy.data<float>(), xp, accumulate, out.data<float>(),
                         workspace, version, ctx.stream());
    return;
  }
#endif
  cpu::channel_reduce(g.outer, g.C, g.inner, dy.data<float>(), xp, accumulate, out.data<float>(),
                      ctx.num_threads());
}

}  // namespace crema::kernels
