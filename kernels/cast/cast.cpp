// Cast, dispatch: checks the tensors once, then runs the path for the device and x's dtype; the
// destination dtype is a run-time argument of both paths, which CUDA checks against what it has.
#include "kernels/cast/cast.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {

void cast(Context& ctx, const Tensor& x, Tensor& y) {
  const char* op = "cast";
  check_tensor(ctx, op, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, op, "y", y, x.shape(), y.dtype());
  const auto on_gpu = [&](auto stream) {
    if (y.dtype() == DType::f64) {
      throw Error(std::string(op) + ": no implementation for " + dtype_name(x.dtype()) +
                  " -> f64 on " + ctx.device().str() + " (cuda casts between f32, bf16 and f16)");
    }
    cuda::cast(x.numel(), x.dtype(), x.raw(), y.dtype(), y.raw(), stream);
  };
  const auto on_host = [&] {
    cpu::cast(x.numel(), x.dtype(), x.raw(), y.dtype(), y.raw(), ctx.num_threads());
  };
  dispatch(ctx, op, x.dtype(), on_cuda(DType::f32, on_gpu), on_cuda(DType::bf16, on_gpu),
           on_cuda(DType::f16, on_gpu), on_cpu(DType::f32, on_host), on_cpu(DType::f64, on_host),
           on_cpu(DType::bf16, on_host), on_cpu(DType::f16, on_host));
}

Tensor cast_to(Context& ctx, const Tensor& x, DType dtype) {
  Tensor y = ctx.empty(x.shape(), dtype);
  cast(ctx, x, y);
  return y;
}

}  // namespace crema::kernels
