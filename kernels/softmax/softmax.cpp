// Softmax, log-softmax and softmax cross-entropy, dispatch: checks the tensors and the axis once
// (and, on the CPU, the labels), then runs the CPU or the CUDA path.
#include "kernels/softmax/softmax.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// [outer, C, inner] around `axis` of `t`.
struct Extents {
  int64_t outer, C, inner;
};

Extents extents(const char* op, const Tensor& t, int axis) {
  const int n = t.ndim();
  if (axis < -n || axis >= n) {
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                t.description());
  }
  const int a = axis < 0 ? axis + n : axis;
  return {shape_count(t.shape(), 0, a), t.shape()[size_t(a)], shape_count(t.shape(), a + 1, n)};
}

// Labels: float32, one per position; on the CPU, each an integer class index in [0, C) or the
// ignore_label (a GPU kernel turns an invalid label into a NaN loss instead: reading the labels
// here would wait for the device).
void check_labels(const Context& ctx, const char* op, const Tensor& labels, const Extents& e,
                  const SoftmaxLossOptions& options) {
  const int64_t positions = e.outer * e.inner;
  if (!labels.defined() || labels.dtype() != DType::f32 || labels.device() != ctx.device() ||
      labels.numel() != positions) {
    throw Error(std::string(op) + ": labels is " +
                (labels.defined() ? labels.description() : std::string("undefined")) +
                ", expected f32 with " + std::to_string(positions) + " elements (outer " +
                std::to_string(e.outer) + " x inner " + std::to_string(e.inner) + ") on " +
                ctx.device().str());
  }
  if (!labels.device().is_cpu()) return;
  const float* l = labels.data<float>();
  for (int64_t j = 0; j < positions; ++j) {
    const float v = l[j];
    if (options.has_ignore_label && v == float(options.ignore_label)) continue;
    if (!(v >= 0.0f && v < float(e.C) && v == std::floor(v))) {
      std::ostringstream message;
      message << op << ": label " << v << " at position " << j << " is not a class index in [0, "
              << e.C << ")";
      if (options.has_ignore_label) message << " nor the ignore_label " << options.ignore_label;
      throw Error(message.str());
    }
  }
}

void check_label_smoothing(const char* op, const SoftmaxLossOptions& options) {
  const float eps = options.label_smoothing;
  if (!(eps >= 0.0f && eps < 1.0f)) {
    throw Error(std::string(op) + ": label_smoothing " + std::to_string(eps) +
                " is outside [0, 1)");
  }
}

// softmax (log = false) or log-softmax (log = true), forward and backward: the same checks.
void forward(Context& ctx, const Tensor& x, Tensor& y, int axis, bool log) {
  const char* op = log ? "log_softmax_forward" : "softmax_forward";
  const Extents e = extents(op, x, axis);
  check_tensor(ctx, op, "x", x, x.shape());
  check_tensor(ctx, op, "y", y, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    (log ? cuda::log_softmax_forward : cuda::softmax_forward)(
        e.outer, e.C, e.inner, x.data<float>(), y.data<float>(), cuda::SoftmaxVersion::best,
        ctx.stream());
    return;
  }
#endif
  (log ? cpu::log_softmax_forward : cpu::softmax_forward)(e.outer, e.C, e.inner, x.data<float>(),
                                                          y.data<float>(), ctx.num_threads());
}

void backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const Extents e = extents(op, y, axis);
  check_tensor(ctx, op, "y", y, y.shape());
  check_tensor(ctx, op, "dy", dy, y.shape());
  check_tensor(ctx, op, "dx", dx, y.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    (log ? cuda::log_softmax_backward : cuda::softmax_backward)(
        e.outer, e.C, e.inner, y.data<float>(), dy.data<float>(), dx.data<float>(),
        cuda::SoftmaxVersion::best, ctx.stream());
    return;
  }
#endif
  (log ? cpu::log_softmax_backward : cpu::softmax_backward)(e.outer, e.C, e.inner, y.data<float>(),
                                                            dy.data<float>(), dx.data<float>(),
                                                            ctx.num_threads());
}

}  // namespace

void softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis) {
  forward(ctx, x, y, axis, false);
}

void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis) {
  backward(ctx, y, dy, dx, axis, false);
}

void log_softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis) {
  forward(ctx, x, y, axis, true);
}

void log_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis) {
  backward(ctx, y, dy, dx, axis, true);
}

void softmax_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor& prob, Tensor& loss, const SoftmaxLossOptions& options) {
  const char* op = "softmax_cross_entropy_forward";
  const Extents e = extents(op, logits, options.axis);
  check_tensor(ctx, op, "logits", logits, logits.shape());
  check_tensor(ctx, op, "prob", prob, logits.shape());
  check_scalar(ctx, op, "loss", loss);
  check_label_smoothing(op, options);
  check_labels(ctx, op, labels, e, options);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const cuda::SoftmaxVersion version = cuda::SoftmaxVersion::best;
    const size_t bytes =
        cuda::softmax_cross_entropy_workspace_bytes(e.outer, e.C, e.inner, options, version);
    void* workspace = bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
    cuda::softmax_cross_entropy_forward(e.outer, e.C, e.inner, logits.data<float>(),
                                        labels.data<float>(), options, prob.data<float>(),
                                        loss.data<float>(), workspace, version, ctx.stream());
    return;
  }
#endif
  cpu::softmax_cross_entropy_forward(e.outer, e.C, e.inner, logits.data<float>(),
                                     labels.data<float>(), options, prob.data<float>(),
                                     loss.data<float>(), ctx.num_threads());
}

void softmax_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& labels,
                                    const Tensor& top_grad, const SoftmaxLossOptions& options,
                                    Tensor& dlogits) {
  const char* op = "softmax_cross_entropy_backward";
  const Extents e = extents(op, prob, options.axis);
  check_tensor(ctx, op, "prob", prob, prob.shape());
  check_tensor(ctx, op, "dlogits", dlogits, prob.shape());
  check_scalar(ctx, op, "top_grad", top_grad);
  check_label_smoothing(op, options);
  check_labels(ctx, op, labels, e, options);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const size_t bytes = cuda::softmax_cross_entropy_workspace_bytes(e.outer, e.C, e.inner, options,
                                                                     cuda::SoftmaxVersion::best);
    void* workspace = bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
    cuda::softmax_cross_entropy_backward(e.outer, e.C, e.inner, prob.data<float>(),
                                         labels.data<float>(), top_grad.data<float>(), options,
                                         dlogits.data<float>(), workspace, ctx.stream());
    return;
  }
#endif
  cpu::softmax_cross_entropy_backward(e.outer, e.C, e.inner, prob.data<float>(),
                                      labels.data<float>(), top_grad.data<float>(), options,
                                      dlogits.data<float>(), ctx.num_threads());
}

}  // namespace crema::kernels
