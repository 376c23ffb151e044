// The convolution's passes with y or dy a window of a wider tensor (convolution.h, ImageWindow;
// core/VIEWS.md): the CPU's f32 nchw path (convolution_cpu.cpp) with the images' stride.
#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels {
namespace {

// The window must hold N images of [K, P, Q] inside its parent, each apart from the next.
float* window_data(const Context& ctx, const std::string& op, const char* name,
                   const Conv2dGeometry& g, const ImageWindow& window) {
  if (window.parent == nullptr) throw Error(op + ": " + name + " has no parent tensor");
  const Tensor& parent = *window.parent;
  check_tensor(ctx, op, name, parent, parent.shape(), DType::f32);
  const int64_t image = g.K * g.P() * g.Q();
  if (window.offset < 0 || window.image_stride < image ||
      window.offset + (g.N - 1) * window.image_stride + image > parent.numel()) {
    throw Error(op + ": " + name + " [" + std::to_string(g.N) + ", " + std::to_string(g.K) + ", " +
                std::to_string(g.P()) + ", " + std::to_string(g.Q()) + "] at offset " +
                std::to_string(window.offset) + ", images " + std::to_string(window.image_stride) +
                " apart, does not fit its parent " + parent.description());
  }
  return window.parent->data<float>() + window.offset;
}

void check_supported(const Context& ctx, const std::string& op, const Tensor& t) {
  if (!conv2d_window_supported(ctx.device(), t.dtype(), t.layout())) {
    throw Error(op + ": runs f32 nchw tensors on the CPU, got " + t.description());
  }
}

}  // namespace

bool conv2d_window_supported(const Device& device, DType dtype, Layout layout) {
  return device.is_cpu() && dtype == DType::f32 && layout == Layout::nchw;
}

void conv2d_forward_window(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                           const Tensor* bias, const ImageWindow& y) {
  const std::string op = "conv2d_forward_window";
  g.validate(op.c_str());
  check_supported(ctx, op, x);
  check_tensor(ctx, op, "x", x, g.x_shape(), DType::f32);
  check_tensor(ctx, op, "w", w, g.w_shape(), DType::f32);
  if (bias) check_tensor(ctx, op, "bias", *bias, {g.K}, DType::f32);
  float* out = window_data(ctx, op, "y", g, y);
  float* workspace = ctx.workspace(cpu::conv2d_forward_workspace(g, ctx.num_threads()));
  cpu::conv2d_forward(g, x.data<float>(), w.data<float>(), bias ? bias->data<float>() : nullptr,
                      out, workspace, ctx.num_threads(), y.image_stride);
}

void conv2d_backward_data_window(Context& ctx, const Conv2dGeometry& g, const ImageWindow& dy,
                                 const Tensor& w, Tensor& dx) {
  const std::string op = "conv2d_backward_data_window";
  g.validate(op.c_str());
  check_supported(ctx, op, dx);
  check_tensor(ctx, op, "w", w, g.w_shape(), DType::f32);
  check_tensor(ctx, op, "dx", dx, g.x_shape(), DType::f32);
  const float* grad = window_data(ctx, op, "dy", g, dy);
  float* workspace = ctx.workspace(cpu::conv2d_backward_data_workspace(g, ctx.num_threads()));
  cpu::conv2d_backward_data(g, grad, w.data<float>(), dx.data<float>(), workspace,
                            ctx.num_threads(), dy.image_stride);
}

// As conv2d_backward_weights on the CPU: the filter pass, then the bias's own.
void conv2d_backward_weights_window(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                    const ImageWindow& dy, Tensor* dw, Tensor* db) {
  const std::string op = "conv2d_backward_weights_window";
  g.validate(op.c_str());
  if (dw == nullptr && db == nullptr) throw Error(op + ": neither dw nor db given");
  check_supported(ctx, op, x);
  check_tensor(ctx, op, "x", x, g.x_shape(), DType::f32);
  if (dw) check_tensor(ctx, op, "dw", *dw, g.w_shape(), DType::f32);
  if (db) check_tensor(ctx, op, "db", *db, {g.K}, DType::f32);
  const float* grad = window_data(ctx, op, "dy", g, dy);
  if (dw) {
    float* workspace = ctx.workspace(cpu::conv2d_backward_filter_workspace(g, ctx.num_threads()));
    cpu::conv2d_backward_filter(g, x.data<float>(), grad, dw->data<float>(), workspace,
                                ctx.num_threads(), dy.image_stride);
  }
  if (db) {
    cpu::conv2d_backward_bias(g, grad, db->data<float>(), ctx.num_threads(), dy.image_stride);
  }
}

}  // namespace crema::kernels
