// ReLU, dispatch: checks the tensors once, then runs the CPU or the CUDA path.
#include "kernels/activations/relu.h"

#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {

void relu_forward(Context& ctx, const Tensor& x, Tensor& y, float negative_slope) {
  check_tensor(ctx, "relu_forward", "x", x, x.shape());
  check_tensor(ctx, "relu_forward", "y", y, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::relu_forward(x.numel(), x.data<float>(), y.data<float>(), negative_slope,
                       cuda::ReluVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::relu_forward(x.numel(), x.data<float>(), y.data<float>(), negative_slope, ctx.num_threads());
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx,
                   float negative_slope) {
  if (negative_slope < 0.0f) {
    throw Error("relu_backward: negative_slope " + std::to_string(negative_slope) +
                " < 0; the backward reads the output y, whose sign then no longer tells x > 0");
  }
  check_tensor(ctx, "relu_backward", "y", y, y.shape());
  check_tensor(ctx, "relu_backward", "dy", dy, y.shape());
  check_tensor(ctx, "relu_backward", "dx", dx, y.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::relu_backward(y.numel(), y.data<float>(), dy.data<float>(), dx.data<float>(),
                        negative_slope, cuda::ReluVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::relu_backward(y.numel(), y.data<float>(), dy.data<float>(), dx.data<float>(), negative_slope,
                     ctx.num_threads());
}

}  // namespace crema::kernels
