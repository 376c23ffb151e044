// 2-D convolution and its transpose: geometry checks and the one dispatch point. Each call
// checks its tensors, then dispatches (kernels/common/dispatch.h):
//   cuda f32   asks select_conv_algorithm (select.h) once for the request's algorithm and runs
//              that record's pass on the context's stream, its scratch from ctx.workspace();
//   cpu f32    the fast im2col + GEMM path (fp32 whatever the math);
//   cpu f64    the reference (it exists for gradient checks, where exactness matters more than
//              speed).
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
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

// An optional tensor's data (bias, db): null when the tensor is absent.
template <class T, class TensorPtr>
auto data_or_null(TensorPtr t) -> decltype(t->template data<T>()) {
  return t ? t->template data<T>() : nullptr;
}

// The record `request` picks for (pass, g) and its workspace from the context.
struct Chosen {
  const ConvAlgorithm& algorithm;
  float* workspace;
};
Chosen choose(Context& ctx, const char* op, ConvPass pass, const Conv2dGeometry& g,
              const ConvRequest& request, bool with_bias = false) {
  const ConvAlgorithm& algorithm = select_conv_algorithm(ctx, pass, g, request, op);
  return {algorithm, ctx.workspace(algorithm.workspace(pass, g, with_bias))};
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
                    const Tensor* bias, Tensor& y, const ConvRequest& request) {
  const char* op = "conv2d_forward";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, g.x_shape(), dtype);
  check_tensor(ctx, op, "w", w, g.w_shape(), dtype);
  if (bias) check_tensor(ctx, op, "bias", *bias, {g.K}, dtype);
  check_tensor(ctx, op, "y", y, g.y_shape(), dtype);
  dispatch(
      ctx, op, dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                const Chosen c = choose(ctx, op, ConvPass::forward, g, request);
                c.algorithm.forward(g, x.data<float>(), w.data<float>(), data_or_null<float>(bias),
                                    y.data<float>(), c.workspace, stream, request.math);
              }),
      on_cpu(DType::f32,
             [&] {
               float* workspace =
                   ctx.workspace(cpu::conv2d_forward_workspace(g, ctx.num_threads()));
               cpu::conv2d_forward(g, x.data<float>(), w.data<float>(), data_or_null<float>(bias),
                                   y.data<float>(), workspace, ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::conv2d_forward(g, x.data<double>(), w.data<double>(), data_or_null<double>(bias),
                            y.data<double>());
      }));
}

void conv2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                          Tensor& dx, const ConvRequest& request) {
  const char* op = "conv2d_backward_data";
  g.validate(op);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  check_tensor(ctx, op, "w", w, g.w_shape(), dtype);
  check_tensor(ctx, op, "dx", dx, g.x_shape(), dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const Chosen c = choose(ctx, op, ConvPass::backward_data, g, request);
                     c.algorithm.backward_data(g, dy.data<float>(), w.data<float>(),
                                               dx.data<float>(), c.workspace, stream, request.math);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    float* workspace =
                        ctx.workspace(cpu::conv2d_backward_data_workspace(g, ctx.num_threads()));
                    cpu::conv2d_backward_data(g, dy.data<float>(), w.data<float>(),
                                              dx.data<float>(), workspace, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::conv2d_backward_data(g, dy.data<double>(), w.data<double>(), dx.data<double>());
           }));
}

void conv2d_backward_filter(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                            const Tensor& dy, Tensor& dw, const ConvRequest& request) {
  conv2d_backward_weights(ctx, g, x, dy, dw, nullptr, request);
}

void conv2d_backward_bias(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, Tensor& db) {
  const char* op = "conv2d_backward_bias";
  g.validate(op);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  check_tensor(ctx, op, "db", db, {g.K}, dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(),
                                              ctx.num_threads());
                  }),
           on_cpu(DType::f64,
                  [&] { ref::conv2d_backward_bias(g, dy.data<double>(), db.data<double>()); }));
}

// On the GPU the bias gradient rides along in the filter pass; on the CPU it is its own pass.
void conv2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                             const Tensor& dy, Tensor& dw, Tensor* db, const ConvRequest& request) {
  const char* op = db ? "conv2d_backward_weights" : "conv2d_backward_filter";
  g.validate(op);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, g.x_shape(), dtype);
  check_tensor(ctx, op, "dy", dy, g.y_shape(), dtype);
  check_tensor(ctx, op, "dw", dw, g.w_shape(), dtype);
  if (db) check_tensor(ctx, op, "db", *db, {g.K}, dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const Chosen c =
                         choose(ctx, op, ConvPass::backward_filter, g, request, db != nullptr);
                     c.algorithm.backward_filter(g, x.data<float>(), dy.data<float>(),
                                                 dw.data<float>(), data_or_null<float>(db),
                                                 c.workspace, stream, request.math);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    float* workspace =
                        ctx.workspace(cpu::conv2d_backward_filter_workspace(g, ctx.num_threads()));
                    cpu::conv2d_backward_filter(g, x.data<float>(), dy.data<float>(),
                                                dw.data<float>(), workspace, ctx.num_threads());
                    if (db)
                      cpu::conv2d_backward_bias(g, dy.data<float>(), db->data<float>(),
                                                ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::conv2d_backward_filter(g, x.data<double>(), dy.data<double>(), dw.data<double>());
             if (db) ref::conv2d_backward_bias(g, dy.data<double>(), db->data<double>());
           }));
}

// The transposed convolution is the convolution's passes with the activations' roles swapped
// (convolution.h); only its bias, which lives on the convolution's input side, needs kernels of
// its own.
void conv_transpose2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                              const Tensor& w, const Tensor* bias, Tensor& y,
                              const ConvRequest& request) {
  const char* op = "conv_transpose2d_forward";
  conv2d_backward_data(ctx, g, x, w, y, request);  // checks g, x, w and y
  if (bias == nullptr) return;
  check_tensor(ctx, op, "bias", *bias, {g.C}, y.dtype());
  const int64_t HW = g.H * g.W;
  dispatch(
      ctx, op, y.dtype(),
      on_cuda(DType::f32,
              [&](auto stream) {
                cuda::add_channel_bias(g.N, g.C, HW, bias->data<float>(), y.data<float>(), stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::add_channel_bias(g.N, g.C, HW, bias->data<float>(), y.data<float>(),
                                     ctx.num_threads());
             }),
      on_cpu(DType::f64,
             [&] { ref::add_channel_bias(g.N, g.C, HW, bias->data<double>(), y.data<double>()); }));
}

void conv_transpose2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy,
                                    const Tensor& w, Tensor& dx, const ConvRequest& request) {
  conv2d_forward(ctx, g, dy, w, nullptr, dx, request);
}

void conv_transpose2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                                       const Tensor& dy, Tensor* dw, Tensor* db,
                                       const ConvRequest& request) {
  const char* op = "conv_transpose2d_backward_weights";
  if (dw) conv2d_backward_filter(ctx, g, dy, x, *dw, request);
  if (db == nullptr) return;
  g.validate(op);
  check_tensor(ctx, op, "dy", dy, g.x_shape(), dy.dtype());
  check_tensor(ctx, op, "db", *db, {g.C}, dy.dtype());
  const int64_t HW = g.H * g.W;
  dispatch(ctx, op, dy.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::channel_bias_gradient(g.N, g.C, HW, dy.data<float>(), db->data<float>(),
                                                 stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::channel_bias_gradient(g.N, g.C, HW, dy.data<float>(), db->data<float>(),
                                               ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::channel_bias_gradient(g.N, g.C, HW, dy.data<double>(), db->data<double>());
           }));
}

}  // namespace crema::kernels
