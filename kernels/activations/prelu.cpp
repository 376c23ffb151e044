// PReLU, dispatch: checks the tensors once, views x as [N, C, D], then runs the CPU or the CUDA
// path.
#include "kernels/activations/prelu.h"

#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

struct Extents {
  int64_t N, C, D;
};

// [1, 1, numel] for a shared slope (one element), [x.dim(0), x.dim(1), rest] otherwise.
Extents extents(const std::string& op, const Tensor& x, const Tensor& slope) {
  if (slope.numel() == 1) return {1, 1, x.numel()};
  if (x.ndim() < 2 || slope.ndim() != 1 || slope.dim(0) != x.dim(1)) {
    throw Error(op + ": slope " + shape_str(slope.shape()) + " must hold one element or one per " +
                "channel (axis 1) of x " + shape_str(x.shape()));
  }
  const int64_t N = x.dim(0), C = x.dim(1);
  return {N, C, N * C == 0 ? 0 : x.numel() / (N * C)};
}

}  // namespace

void prelu_forward(Context& ctx, const Tensor& x, const Tensor& slope, Tensor& y) {
  check_tensor(ctx, "prelu_forward", "x", x, x.shape());
  check_tensor(ctx, "prelu_forward", "slope", slope, slope.shape());
  check_tensor(ctx, "prelu_forward", "y", y, x.shape());
  const Extents e = extents("prelu_forward", x, slope);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::prelu_forward(e.N, e.C, e.D, x.data<float>(), slope.data<float>(), y.data<float>(),
                        ctx.stream());
    return;
  }
#endif
  cpu::prelu_forward(e.N, e.C, e.D, x.data<float>(), slope.data<float>(), y.data<float>(),
                     ctx.num_threads());
}

void prelu_backward_data(Context& ctx, const Tensor& x, const Tensor& slope, const Tensor& dy,
                         Tensor& dx) {
  check_tensor(ctx, "prelu_backward_data", "x", x, x.shape());
  check_tensor(ctx, "prelu_backward_data", "slope", slope, slope.shape());
  check_tensor(ctx, "prelu_backward_data", "dy", dy, x.shape());
  check_tensor(ctx, "prelu_backward_data", "dx", dx, x.shape());
  const Extents e = extents("prelu_backward_data", x, slope);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::prelu_backward_data(e.N, e.C, e.D, x.data<float>(), slope.data<float>(), dy.data<float>(),
                              dx.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::prelu_backward_data(e.N, e.C, e.D, x.data<float>(), slope.data<float>(), dy.data<float>(),
                           dx.data<float>(), ctx.num_threads());
}

void prelu_backward_slope(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dslope) {
  check_tensor(ctx, "prelu_backward_slope", "x", x, x.shape());
  check_tensor(ctx, "prelu_backward_slope", "dy", dy, x.shape());
  check_tensor(ctx, "prelu_backward_slope", "dslope", dslope, dslope.shape());
  const Extents e = extents("prelu_backward_slope", x, dslope);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const auto version = cuda::PreluVersion::best;
    const size_t floats = cuda::prelu_backward_slope_workspace(e.N, e.C, e.D, version);
    float* workspace = floats > 0 ? ctx.workspace(floats) : nullptr;
    cuda::prelu_backward_slope(e.N, e.C, e.D, x.data<float>(), dy.data<float>(),
                               dslope.data<float>(), workspace, version, ctx.stream());
    return;
  }
#endif
  cpu::prelu_backward_slope(e.N, e.C, e.D, x.data<float>(), dy.data<float>(), dslope.data<float>(),
                            ctx.num_threads());
}

}  // namespace crema::kernels
