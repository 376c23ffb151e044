// Adaptive 2-D pooling, dispatch: checks the tensors and the geometry once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference).
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/pooling/adaptive_pooling.h"
#include "kernels/pooling/argmax_checks.h"

namespace crema::kernels {
namespace {

void check_geometry(const char* op, const AdaptivePool2dGeometry& g, PoolMode mode) {
  if (!(g.N >= 0 && g.C >= 0 && g.H >= 1 && g.W >= 1 && g.P >= 1 && g.Q >= 1)) {
    throw Error(std::string(op) + ": invalid geometry (input " + std::to_string(g.H) + "x" +
                std::to_string(g.W) + ", output " + std::to_string(g.P) + "x" +
                std::to_string(g.Q) + ")");
  }
  pooling_detail::check_argmax_plane(op, mode, g.H, g.W);
}

}  // namespace

void adaptive_pool2d_forward(Context& ctx, const AdaptivePool2dGeometry& g, PoolMode mode,
                             const Tensor& x, Tensor& y, Tensor* argmax) {
  const char* op = "adaptive_pool2d_forward";
  check_geometry(op, g, mode);
  const DType dtype = x.dtype();
  check_tensor(ctx, op, "x", x, {g.N, g.C, g.H, g.W}, dtype);
  check_tensor(ctx, op, "y", y, {g.N, g.C, g.P, g.Q}, dtype);
  pooling_detail::check_argmax(ctx, op, mode, argmax, {g.N, g.C, g.P, g.Q}, dtype, false);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::adaptive_pool2d_forward(g, mode, x.data<float>(), y.data<float>(),
                                                   pooling_detail::indices_of<float>(argmax),
                                                   stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::adaptive_pool2d_forward(g, mode, x.data<float>(), y.data<float>(),
                                                 pooling_detail::indices_of<float>(argmax),
                                                 ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::adaptive_pool2d_forward(g, mode, x.data<double>(), y.data<double>(),
                                          pooling_detail::indices_of<double>(argmax));
           }));
}

void adaptive_pool2d_backward(Context& ctx, const AdaptivePool2dGeometry& g, PoolMode mode,
                              const Tensor& dy, const Tensor* argmax, Tensor& dx) {
  const char* op = "adaptive_pool2d_backward";
  check_geometry(op, g, mode);
  const DType dtype = dy.dtype();
  check_tensor(ctx, op, "dy", dy, {g.N, g.C, g.P, g.Q}, dtype);
  check_tensor(ctx, op, "dx", dx, {g.N, g.C, g.H, g.W}, dtype);
  pooling_detail::check_argmax(ctx, op, mode, argmax, {g.N, g.C, g.P, g.Q}, dtype, true);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::adaptive_pool2d_backward(g, mode, dy.data<float>(),
                                                    pooling_detail::indices_of<float>(argmax),
                                                    dx.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::adaptive_pool2d_backward(g, mode, dy.data<float>(),
                                                  pooling_detail::indices_of<float>(argmax),
                                                  dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::adaptive_pool2d_backward(g, mode, dy.data<double>(),
                                           pooling_detail::indices_of<double>(argmax),
                                           dx.data<double>());
           }));
}

}  // namespace crema::kernels
