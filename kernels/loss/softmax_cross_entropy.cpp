// Softmax cross-entropy, dispatch: checks the tensors, the axis and (on the CPU) the labels once,
// then runs the path for the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the
// reference, normalized here, for gradient checks).
#include "kernels/loss/softmax_cross_entropy.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

// Each label, in host memory, is an integer class index in [0, C) or the ignore_label.
template <class T>
void check_label_values(const char* op, const T* l, int64_t positions, const SoftmaxExtents& e,
                        const SoftmaxLossOptions& options) {
  for (int64_t j = 0; j < positions; ++j) {
    const T v = l[j];
    if (options.has_ignore_label && v == T(options.ignore_label)) continue;
    if (!(v >= T(0) && v < T(e.C) && v == std::floor(v))) {
      std::ostringstream message;
      message << op << ": label " << v << " at position " << j << " is not a class index in [0, "
              << e.C << ")";
      if (options.has_ignore_label) message << " nor the ignore_label " << options.ignore_label;
      throw Error(message.str());
    }
  }
}

// Labels: of the logits' dtype, one per position; on the CPU, each checked (a GPU kernel turns an
// invalid label into a NaN loss instead: reading the labels here would wait for the device).
void check_labels(const Context& ctx, const char* op, const Tensor& labels, DType dtype,
                  const SoftmaxExtents& e, const SoftmaxLossOptions& options) {
  const int64_t positions = e.outer * e.inner;
  check_numel(ctx, op, "labels", labels, positions,
              "position, outer " + std::to_string(e.outer) + " x inner " + std::to_string(e.inner),
              dtype);
  if (!labels.device().is_cpu()) return;
  if (dtype == DType::f64) {
    check_label_values(op, labels.data<double>(), positions, e, options);
  } else if (dtype == DType::f32) {
    check_label_values(op, labels.data<float>(), positions, e, options);
  }
}

void check_label_smoothing(const char* op, const SoftmaxLossOptions& options) {
  const float eps = options.label_smoothing;
  if (!(eps >= 0.0f && eps < 1.0f)) {
    throw Error(std::string(op) + ": label_smoothing " + std::to_string(eps) +
                " is outside [0, 1)");
  }
}

// The device scratch of the CUDA forward and backward. Generic in the stream, as the CUDA lambdas
// are, so that only a CUDA build compiles it.
template <class Stream>
void* xent_workspace(Context& ctx, const SoftmaxExtents& e, const SoftmaxLossOptions& options,
                     Stream) {
  return workspace_for(ctx, cuda::softmax_cross_entropy_workspace_bytes(
                                e.outer, e.C, e.inner, options, cuda::SoftmaxVersion::best));
}

// The float64 backward's normalizer: the labels not ignored (the reference's test), counted on the
// host.
int64_t normalizer(const SoftmaxExtents& e, const double* labels,
                   const SoftmaxLossOptions& options) {
  int64_t counted = 0;
  for (int64_t j = 0; j < e.outer * e.inner; ++j) {
    counted += options.has_ignore_label && int64_t(labels[j]) == options.ignore_label ? 0 : 1;
  }
  return loss_normalizer(options.normalization, e.outer, e.inner, counted);
}

}  // namespace

void softmax_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor& prob, Tensor& loss, const SoftmaxLossOptions& options) {
  const char* op = "softmax_cross_entropy_forward";
  const SoftmaxExtents e = softmax_extents(op, logits, options.axis);
  const DType dtype = logits.dtype();
  check_tensors(ctx, op, logits.shape(), dtype, {{"logits", logits}, {"prob", prob}});
  check_scalar(ctx, op, "loss", loss, dtype);
  check_label_smoothing(op, options);
  check_labels(ctx, op, labels, dtype, e, options);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::softmax_cross_entropy_forward(
                         e.outer, e.C, e.inner, logits.data<float>(), labels.data<float>(), options,
                         prob.data<float>(), loss.data<float>(),
                         xent_workspace(ctx, e, options, stream), cuda::SoftmaxVersion::best,
                         stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::softmax_cross_entropy_forward(
                        e.outer, e.C, e.inner, logits.data<float>(), labels.data<float>(), options,
                        prob.data<float>(), loss.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             int64_t counted = 0;
             const double sum = ref::softmax_cross_entropy_forward(
                 e.outer, e.C, e.inner, logits.data<double>(), labels.data<double>(), options,
                 prob.data<double>(), &counted);
             loss.data<double>()[0] =
                 sum / double(loss_normalizer(options.normalization, e.outer, e.inner, counted));
           }));
}

void softmax_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& labels,
                                    const Tensor& top_grad, const SoftmaxLossOptions& options,
                                    Tensor& dlogits) {
  const char* op = "softmax_cross_entropy_backward";
  const SoftmaxExtents e = softmax_extents(op, prob, options.axis);
  const DType dtype = prob.dtype();
  check_tensors(ctx, op, prob.shape(), dtype, {{"prob", prob}, {"dlogits", dlogits}});
  check_scalar(ctx, op, "top_grad", top_grad, dtype);
  check_label_smoothing(op, options);
  check_labels(ctx, op, labels, dtype, e, options);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::softmax_cross_entropy_backward(
                         e.outer, e.C, e.inner, prob.data<float>(), labels.data<float>(),
                         top_grad.data<float>(), options, dlogits.data<float>(),
                         xent_workspace(ctx, e, options, stream), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::softmax_cross_entropy_backward(
                        e.outer, e.C, e.inner, prob.data<float>(), labels.data<float>(),
                        top_grad.data<float>(), options, dlogits.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const double scale =
                 top_grad.data<double>()[0] / double(normalizer(e, labels.data<double>(), options));
             ref::softmax_cross_entropy_backward(e.outer, e.C, e.inner, prob.data<double>(),
                                                 labels.data<double>(), options, scale,
                                                 dlogits.data<double>());
           }));
}

}  // namespace crema::kernels
