// 2-D convolution and its transpose: geometry checks and the one dispatch point (device and
// dtype -> path).
//
// float32 on the CPU runs the fast im2col + GEMM path; float64 runs the reference (it exists
// for gradient checks, where exactness matters more than speed). On a GPU (float32 only) the
// cuda:: version asked for, or else the one chosen for the geometry, pass and math
// (cuda::forward_version and its siblings), runs on the context's stream in the math asked for,
// its scratch from ctx.workspace(). The CPU computes in fp32 (or float64) whatever the math.
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels {
namespace {

std::string pair_str(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

void check_positive(const std::string& where, const char* name, int64_t value) {
  if (value <= 0) {
    throw Error(where + ": " + name + " must be positive, got " + std::to_string(value));
  }
}

// Checks that `t` is a `dtype` tensor of `shape` on the context's device.
void check_tensor(const Context& ctx, const char* op, const char* name, const Tensor& t,
                  const Shape& shape, DType dtype) {
  if (!t.defined()) throw Error(std::string(op) + ": " + name + " is an undefined tensor");
  if (t.shape() != shape) {
    throw Error(std::string(op) + ": " + name + " is " + t.description() +
                " but the convolution geometry needs " + shape_str(shape));
  }
  if (t.dtype() != dtype) {
    throw Error(std::string(op) + ": " + name + " is " + t.description() + " but the other " +
                "tensors are " + dtype_name(dtype));
  }
  if (t.device() != ctx.device()) {
    throw Error(std::string(op) + ": " + name + " is " + t.description() +
                " but the context runs on " + ctx.device().str());
  }
#ifdef CREMA_WITH_CUDA
  if (t.device().is_cuda() && dtype != DType::f32) {
    throw Error(std::string(op) + ": " + name + " is " + t.description() +
                "; convolution on a GPU is float32 only");
  }
#else
  if (!t.device().is_cpu()) {
    throw Error(std::string(op) + ": " + name + " is on " + t.device().str() +
                "; this build has no CUDA backend");
  }
#endif
}

Shape x_shape(const Conv2dGeometry& g) {
  return {g.N, g.C, g.H, g.W};
}
Shape w_shape(const Conv2dGeometry& g) {
  return {g.K, g.C / g.groups, g.R, g.S};
}
Shape y_shape(const Conv2dGeometry& g) {
  return {g.N, g.K, g.P(), g.Q()};
}

}  // namespace

void Conv2dGeometry::validate(const std::string& where) const {
  check_positive(where, "batch size N", N);
  check_positive(where, "input channels C", C);
  check_positive(where, "input height H", H);
  check_positive(where, "input width W", W);
  check_positive(where, "output channels K", K);
  check_positive(where, "filter height R", R);
  check_positive(where, "filter width S", S);
  check_positive(where, "stride_h", stride_h);
  check_positive(where, "stride_w", stride_w);
  check_positive(where, "dilation_h", dilation_h);
  check_positive(where, "dilation_w", dilation_w);
  check_positive(where, "groups", groups);
  if (pad_h < 0 || pad_w < 0) {
    throw Error(where + ": padding must not be negative, got " + pair_str(pad_h, pad_w));
  }
  if (C % groups != 0 || K % groups != 0) {
    throw Error(where + ": " + std::to_string(groups) + " groups must divide both the input " +
                "channels C=" + std::to_string(C) +
                " and the output channels K=" + std::to_string(K));
  }
  const int64_t span_h = dilation_h * (R - 1) + 1, span_w = dilation_w * (S - 1) + 1;
  if (span_h > H + 2 * pad_h || span_w > W + 2 * pad_w) {
    throw Error(where + ": the " + pair_str(R, S) + " filter (spanning " +
                pair_str(span_h, span_w) + " with dilation " + pair_str(dilation_h, dilation_w) +
                ") is larger than the padded input " + pair_str(H + 2 * pad_h, W + 2 * pad_w) +
                " (input " + pair_str(H, W) + ", padding " + pair_str(pad_h, pad_w) +
                "); use a smaller filter or more padding");
  }
}

Im2colGeometry Conv2dGeometry::group_patches() const {
  return {C / groups, H, W, R, S, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w};
}

void conv2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y, std::optional<cuda::ConvVersion> version,
                    cuda::GemmMath math) {
  const char* op = "conv2d_forward";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x_shape(g), dtype);
  check_tensor(ctx, op, "w", w, w_shape(g), dtype);
  if (bias) check_tensor(ctx, op, "bias", *bias, {g.K}, dtype);
  check_tensor(ctx, op, "y", y, y_shape(g), dtype);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const cuda::ConvVersion v = version.value_or(cuda::forward_version(g, math));
    cuda::conv2d_forward(g, x.data<float>(), w.data<float>(), bias ? bias->data<float>() : nullptr,
                         y.data<float>(), ctx.workspace(cuda::conv2d_forward_workspace(g, v)),
                         ctx.stream(), v, math);
    return;
  }
#endif
  if (dtype == DType::f64) {
    ref::conv2d_forward(g, x.data<double>(), w.data<double>(),
                        bias ? bias->data<double>() : nullptr, y.data<double>());
    return;
  }
  float* workspace = ctx.workspace(cpu::conv2d_forward_workspace(g, ctx.num_threads()));
  cpu::conv2d_forward(g, x.data<float>(), w.data<float>(), bias ? bias->data<float>() : nullptr,
                      y.data<float>(), workspace, ctx.num_threads());
}

void conv2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                          Tensor& dx, std::optional<cuda::ConvVersion> version,
                          cuda::GemmMath math) {
  const char* op = "conv2d_backward_data";
  g.validate(op);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, y_shape(g), dtype);
  check_tensor(ctx, op, "w", w, w_shape(g), dtype);
  check_tensor(ctx, op, "dx", dx, x_shape(g), dtype);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const cuda::ConvVersion v = version.value_or(cuda::backward_data_version(g, math));
    cuda::conv2d_backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                               ctx.workspace(cuda::conv2d_backward_data_workspace(g, v)),
                               ctx.stream(), v, math);
    return;
  }
#endif
  if (dtype == DType::f64) {
    ref::conv2d_backward_data(g, dy.data<double>(), w.data<double>(), dx.data<double>());
    return;
  }
  float* workspace = ctx.workspace(cpu::conv2d_backward_data_workspace(g, ctx.num_threads()));
  cpu::conv2d_backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(), workspace,
                            ctx.num_threads());
}

void conv2d_backward_filter(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                            const Tensor& dy, Tensor& dw, std::optional<cuda::ConvVersion> version,
                            cuda::GemmMath math) {
  const char* op = "conv2d_backward_filter";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x_shape(g), dtype);
  check_tensor(ctx, op, "dy", dy, y_shape(g), dtype);
  check_tensor(ctx, op, "dw", dw, w_shape(g), dtype);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const cuda::ConvVersion v = version.value_or(cuda::backward_filter_version(g, math));
    cuda::conv2d_backward_filter(g, x.data<float>(), dy.data<float>(), dw.data<float>(), nullptr,
                                 ctx.workspace(cuda::conv2d_backward_filter_workspace(g, false, v)),
                                 ctx.stream(), v, math);
    return;
  }
#endif
  if (dtype == DType::f64) {
    ref::conv2d_backward_filter(g, x.data<double>(), dy.data<double>(), dw.data<double>());
    return;
  }
  float* workspace = ctx.workspace(cpu::conv2d_backward_filter_workspace(g, ctx.num_threads()));
  cpu::conv2d_backward_filter(g, x.data<float>(), dy.data<float>(), dw.data<float>(), workspace,
                              ctx.num_threads());
}

void conv2d_backward_bias(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, Tensor& db) {
  const char* op = "conv2d_backward_bias";
  g.validate(op);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, y_shape(g), dtype);
  check_tensor(ctx, op, "db", db, {g.K}, dtype);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(), ctx.stream());
    return;
  }
#endif
  if (dtype == DType::f64) {
    ref::conv2d_backward_bias(g, dy.data<double>(), db.data<double>());
    return;
  }
  cpu::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(), ctx.num_threads());
}

void conv2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                             const Tensor& dy, Tensor& dw, Tensor* db,
                             std::optional<cuda::ConvVersion> version, cuda::GemmMath math) {
  const char* op = "conv2d_backward_weights";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x_shape(g), dtype);
  check_tensor(ctx, op, "dy", dy, y_shape(g), dtype);
  check_tensor(ctx, op, "dw", dw, w_shape(g), dtype);
  if (db) check_tensor(ctx, op, "db", *db, {g.K}, dtype);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const bool with_bias = db != nullptr;
    const cuda::ConvVersion v = version.value_or(cuda::backward_filter_version(g, math));
    cuda::conv2d_backward_filter(
        g, x.data<float>(), dy.data<float>(), dw.data<float>(),
        with_bias ? db->data<float>() : nullptr,
        ctx.workspace(cuda::conv2d_backward_filter_workspace(g, with_bias, v)), ctx.stream(), v,
        math);
    return;
  }
#endif
  conv2d_backward_filter(ctx, g, x, dy, dw, version, math);
  if (db) conv2d_backward_bias(ctx, g, dy, *db);
}

// The transposed convolution is the convolution's passes with the activations' roles swapped
// (convolution.h); only its bias, which lives on the convolution's input side, needs kernels of
// its own.
void conv_transpose2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& w, const Tensor* bias, Tensor& y,
                              std::optional<cuda::ConvVersion> version, cuda::GemmMath math) {
  const char* op = "conv_transpose2d_forward";
  conv2d_backward_data(ctx, g, x, w, y, version, math);  // checks g, x, w and y
  if (bias == nullptr) return;
  check_tensor(ctx, op, "bias", *bias, {g.C}, y.dtype());
  const int64_t HW = g.H * g.W;
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::add_channel_bias(g.N, g.C, HW, bias->data<float>(), y.data<float>(), ctx.stream());
    return;
  }
#endif
  if (y.dtype() == DType::f64) {
    ref::add_channel_bias(g.N, g.C, HW, bias->data<double>(), y.data<double>());
    return;
  }
  cpu::add_channel_bias(g.N, g.C, HW, bias->data<float>(), y.data<float>(), ctx.num_threads());
}

void conv_transpose2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy,
                                    const Tensor& w, Tensor& dx,
                                    std::optional<cuda::ConvVersion> version, cuda::GemmMath math) {
  conv2d_forward(ctx, g, dy, w, nullptr, dx, version, math);
}

void conv_transpose2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                       const Tensor& dy, Tensor* dw, Tensor* db,
                                       std::optional<cuda::ConvVersion> version,
                                       cuda::GemmMath math) {
  const char* op = "conv_transpose2d_backward_weights";
  if (dw) conv2d_backward_filter(ctx, g, dy, x, *dw, version, math);
  if (db == nullptr) return;
  g.validate(op);
  check_tensor(ctx, op, "dy", dy, x_shape(g), dy.dtype());
  check_tensor(ctx, op, "db", *db, {g.C}, dy.dtype());
  const int64_t HW = g.H * g.W;
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::channel_bias_gradient(g.N, g.C, HW, dy.data<float>(), db->data<float>(), ctx.stream());
    return;
  }
#endif
  if (dy.dtype() == DType::f64) {
    ref::channel_bias_gradient(g.N, g.C, HW, dy.data<double>(), db->data<double>());
    return;
  }
  cpu::channel_bias_gradient(g.N, g.C, HW, dy.data<float>(), db->data<float>(), ctx.num_threads());
}

}  // namespace crema::kernels
