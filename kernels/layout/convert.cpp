// convert, dispatch: a 4-D pair of different layouts is a batched transpose (B = N, and R x S
// = C x HW or HW x C), everything else a copy (B = 1, R = 1, S = numel); both run the one
// converting kernel of the device.
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/layout/layout.h"

namespace crema::kernels {

void convert(Context& ctx, const Tensor& x, Tensor& y, bool accumulate) {
  const char* op = "convert";
  check_tensor(ctx, op, "x", x, x.shape(), x.dtype());
  check_tensor(ctx, op, "y", y, x.shape(), y.dtype());
  if (accumulate && y.dtype() != DType::f32) {
    throw Error(std::string(op) + ": accumulate needs an f32 y, got " + y.description());
  }
  if (x.shares_storage(y)) throw Error(std::string(op) + ": y shares storage with x");
  int64_t B = 1, R = 1, S = x.numel();
  if (x.ndim() == 4 && x.layout() != y.layout()) {
    const int64_t C = x.dim(1), HW = x.dim(2) * x.dim(3);
    B = x.dim(0);
    R = x.layout() == Layout::nchw ? C : HW;
    S = x.layout() == Layout::nchw ? HW : C;
  }
  const auto on_gpu = [&](auto stream) {
    if (y.dtype() == DType::f64) {
      throw Error(std::string(op) + ": no implementation for " + dtype_name(x.dtype()) +
                  " -> f64 on " + ctx.device().str() + " (cuda converts between f32, bf16, f16)");
    }
    cuda::convert(B, R, S, x.dtype(), x.raw(), y.dtype(), y.raw(), accumulate, stream);
  };
  const auto on_host = [&] {
    cpu::convert(B, R, S, x.dtype(), x.raw(), y.dtype(), y.raw(), accumulate, ctx.num_threads());
  };
  dispatch(ctx, op, x.dtype(), on_cuda(DType::f32, on_gpu), on_cuda(DType::bf16, on_gpu),
           on_cuda(DType::f16, on_gpu), on_cpu(DType::f32, on_host), on_cpu(DType::f64, on_host),
           on_cpu(DType::bf16, on_host), on_cpu(DType::f16, on_host));
}

}  // namespace crema::kernels
