// The transposed 2-D convolution (convolution.h, "Transposed convolution"): the convolution's
// passes with the activations' roles swapped -- forward is the convolution's backward data,
// backward data its forward, the weights' gradient its filter gradient with x and dy exchanged
// -- and the bias, which lives on the convolution's input side, through the channel-bias kernels
// (f32 on CUDA and the CPU, f64 the reference).
#include <cstdint>

#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels {

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
