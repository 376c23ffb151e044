// ReLU, dispatch: checks the tensors once, then runs the path for the device and dtype (float32:
// cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU: the reference, for gradient checks).
#include "kernels/activations/relu.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y, float negative_slope) {
  const char* op = "relu_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::relu_forward(x.numel(), x.data<T>(), y.data<T>(), negative_slope, cuda::ReluVersion::best,
                       stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::relu_forward(x.numel(), x.data<float>(), y.data<float>(), negative_slope,
                                      ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::relu_forward(x.numel(), x.data<double>(), y.data<double>(),
                               double(negative_slope));
           }));
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx,
                   float negative_slope) {
  const char* op = "relu_backward";
  if (negative_slope < 0.0f) {
    throw Error(std::string(op) + ": negative_slope " + std::to_string(negative_slope) +
                " < 0; the backward reads the output y, whose sign then no longer tells x > 0");
  }
  const DType dtype = y.dtype();
  check_tensors(ctx, op, y.shape(), dtype, {{"y", y}, {"dy", dy}, {"dx", dx}});
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::relu_backward(y.numel(), y.data<T>(), dy.data<T>(), dx.data<T>(), negative_slope,
                        cuda::ReluVersion::best, stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::relu_backward(y.numel(), y.data<float>(), dy.data<float>(),
                                       dx.data<float>(), negative_slope, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::relu_backward(y.numel(), y.data<double>(), dy.data<double>(), dx.data<double>(),
                                double(negative_slope));
           }));
}

}  // namespace crema::kernels
