// PReLU, dispatch: checks the tensors once, views x as [N, C, D], then runs the path for the
// device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference).
#include "kernels/activations/prelu.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

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
  const char* op = "prelu_forward";
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x.shape(), dtype);
  check_tensor(ctx, op, "slope", slope, slope.shape(), dtype);
  check_tensor(ctx, op, "y", y, x.shape(), dtype);
  const Extents e = extents(op, x, slope);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::prelu_forward(e.N, e.C, e.D, x.data<float>(), slope.data<float>(),
                                         y.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::prelu_forward(e.N, e.C, e.D, x.data<float>(), slope.data<float>(),
                                       y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::prelu_forward(e.N, e.C, e.D, x.data<double>(), slope.data<double>(),
                                y.data<double>());
           }));
}

void prelu_backward_data(Context& ctx, const Tensor& x, const Tensor& slope, const Tensor& dy,
                         Tensor& dx) {
  const char* op = "prelu_backward_data";
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, x.shape(), dtype);
  check_tensor(ctx, op, "slope", slope, slope.shape(), dtype);
  check_tensors(ctx, op, x.shape(), dtype, {{"dy", dy}, {"dx", dx}});
  const Extents e = extents(op, x, slope);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::prelu_backward_data(e.N, e.C, e.D, x.data<float>(), slope.data<float>(),
                                               dy.data<float>(), dx.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::prelu_backward_data(e.N, e.C, e.D, x.data<float>(), slope.data<float>(),
                                             dy.data<float>(), dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::prelu_backward_data(e.N, e.C, e.D, x.data<double>(), slope.data<double>(),
                                      dy.data<double>(), dx.data<double>());
           }));
}

void prelu_backward_slope(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dslope) {
  const char* op = "prelu_backward_slope";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"dy", dy}});
  check_tensor(ctx, op, "dslope", dslope, dslope.shape(), dtype);
  const Extents e = extents(op, x, dslope);
  dispatch(
      ctx, op, dtype,
      on_cuda(DType::f32,
              [&](auto stream) {
                const auto version = cuda::PreluVersion::best;
                const size_t floats = cuda::prelu_backward_slope_workspace(e.N, e.C, e.D, version);
                auto* workspace = static_cast<float*>(workspace_for(ctx, floats * sizeof(float)));
                cuda::prelu_backward_slope(e.N, e.C, e.D, x.data<float>(), dy.data<float>(),
                                           dslope.data<float>(), workspace, version, stream);
              }),
      on_cpu(DType::f32,
             [&] {
               cpu::prelu_backward_slope(e.N, e.C, e.D, x.data<float>(), dy.data<float>(),
                                         dslope.data<float>(), ctx.num_threads());
             }),
      on_cpu(DType::f64, [&] {
        ref::prelu_backward_slope(e.N, e.C, e.D, x.data<double>(), dy.data<double>(),
                                  dslope.data<double>());
      }));
}

}  // namespace crema::kernels
