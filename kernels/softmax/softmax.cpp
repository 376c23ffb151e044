// Softmax and log-softmax, dispatch: checks the tensors and the axis once, then runs the path for
// the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference, for gradient
// checks).
#include "kernels/softmax/softmax.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// The three forwards (cuDNN's softmax algorithms) and the two backwards: the same checks.
enum class Algorithm { accurate, fast, log };

void forward(Context& ctx, const Tensor& x, Tensor& y, int axis, Algorithm algorithm) {
  const bool log = algorithm == Algorithm::log, fast = algorithm == Algorithm::fast;
  const char* op = log ? "log_softmax_forward" : fast ? "softmax_fast_forward" : "softmax_forward";
  const SoftmaxExtents e = softmax_extents(op, x, axis);
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     (log    ? cuda::log_softmax_forward
                      : fast ? cuda::softmax_fast_forward
                             : cuda::softmax_forward)(e.outer, e.C, e.inner, x.data<float>(),
                                                      y.data<float>(), cuda::SoftmaxVersion::best,
                                                      stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    (log    ? cpu::log_softmax_forward
                     : fast ? cpu::softmax_fast_forward
                            : cpu::softmax_forward)(e.outer, e.C, e.inner, x.data<float>(),
                                                    y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             (log    ? ref::log_softmax_forward<double>
              : fast ? ref::softmax_fast_forward<double>
                     : ref::softmax_forward<double>)(e.outer, e.C, e.inner, x.data<double>(),
                                                     y.data<double>());
           }));
}

void backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const SoftmaxExtents e = softmax_extents(op, y, axis);
  const DType dtype = y.dtype();
  check_tensors(ctx, op, y.shape(), dtype, {{"y", y}, {"dy", dy}, {"dx", dx}});
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     (log ? cuda::log_softmax_backward : cuda::softmax_backward)(
                         e.outer, e.C, e.inner, y.data<float>(), dy.data<float>(), dx.data<float>(),
                         cuda::SoftmaxVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    (log ? cpu::log_softmax_backward : cpu::softmax_backward)(
                        e.outer, e.C, e.inner, y.data<float>(), dy.data<float>(), dx.data<float>(),
                        ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             (log ? ref::log_softmax_backward<double>
                  : ref::softmax_backward<double>)(e.outer, e.C, e.inner, y.data<double>(),
                                                   dy.data<double>(), dx.data<double>());
           }));
}

}  // namespace

SoftmaxExtents softmax_extents(const char* op, const Tensor& t, int axis) {
  const int n = t.ndim();
  if (axis < -n || axis >= n) {
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                t.description());
  }
  const int a = axis < 0 ? axis + n : axis;
  return {shape_count(t.shape(), 0, a), t.shape()[size_t(a)], shape_count(t.shape(), a + 1, n)};
}

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis) {
  forward(ctx, x, y, axis, Algorithm::accurate);
}

void softmax_fast_forward(Context& ctx, const Tensor& x, Tensor& y, int axis) {
  forward(ctx, x, y, axis, Algorithm::fast);
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis) {
  backward(ctx, y, dy, dx, axis, false);
}

void log_softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis) {
  forward(ctx, x, y, axis, Algorithm::log);
}

void log_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis) {
  backward(ctx, y, dy, dx, axis, true);
}

}  // namespace crema::kernels
