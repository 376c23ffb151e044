// Soft-target cross-entropy, dispatch: checks the tensors, the axis and the options once, then runs
// the path for the device and dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference,
// normalized here, for gradient checks).
#include "kernels/loss/soft_target_cross_entropy.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

void check_options(const char* op, const SoftmaxLossOptions& options) {
  const float eps = options.label_smoothing;
  if (!(eps >= 0.0f && eps < 1.0f)) {
    throw Error(std::string(op) + ": label_smoothing " + std::to_string(eps) +
                " is outside [0, 1)");
  }
  if (options.has_ignore_label) {
    throw Error(std::string(op) +
                ": soft targets have no ignore_label (every position counts, as in torch)");
  }
}

// The CUDA forward's device scratch. Generic in the stream, as the CUDA lambdas are, so that only
// a CUDA build compiles it.
template <class Stream>
void* forward_workspace(Context& ctx, const SoftmaxExtents& e, Stream) {
  return workspace_for(ctx, cuda::soft_target_cross_entropy_workspace_bytes(
                                e.outer, e.C, e.inner, cuda::SoftmaxVersion::best));
}

// Every position counts: the normalizer does not depend on the targets.
double normalizer(const SoftmaxExtents& e, const SoftmaxLossOptions& options) {
  return double(loss_normalizer(options.normalization, e.outer, e.inner, e.outer * e.inner));
}

}  // namespace

void soft_target_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& targets,
                                       Tensor& prob, Tensor& loss,
                                       const SoftmaxLossOptions& options) {
  const char* op = "soft_target_cross_entropy_forward";
  const SoftmaxExtents e = softmax_extents(op, logits, options.axis);
  const DType dtype = logits.dtype();
  check_tensors(ctx, op, logits.shape(), dtype,
                {{"logits", logits}, {"targets", targets}, {"prob", prob}});
  check_scalar(ctx, op, "loss", loss, dtype);
  check_options(op, options);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::soft_target_cross_entropy_forward(
                         e.outer, e.C, e.inner, logits.data<float>(), targets.data<float>(),
                         options, prob.data<float>(), loss.data<float>(),
                         forward_workspace(ctx, e, stream), cuda::SoftmaxVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::soft_target_cross_entropy_forward(
                        e.outer, e.C, e.inner, logits.data<float>(), targets.data<float>(), options,
                        prob.data<float>(), loss.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const double sum = ref::soft_target_cross_entropy_forward(
                 e.outer, e.C, e.inner, logits.data<double>(), targets.data<double>(), options,
                 prob.data<double>());
             loss.data<double>()[0] = sum / normalizer(e, options);
           }));
}

void soft_target_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& targets,
                                        const Tensor& top_grad, const SoftmaxLossOptions& options,
                                        Tensor& dlogits) {
  const char* op = "soft_target_cross_entropy_backward";
  const SoftmaxExtents e = softmax_extents(op, prob, options.axis);
  const DType dtype = prob.dtype();
  check_tensors(ctx, op, prob.shape(), dtype,
                {{"prob", prob}, {"targets", targets}, {"dlogits", dlogits}});
  check_scalar(ctx, op, "top_grad", top_grad, dtype);
  check_options(op, options);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::soft_target_cross_entropy_backward(
                         e.outer, e.C, e.inner, prob.data<float>(), targets.data<float>(),
                         top_grad.data<float>(), options, dlogits.data<float>(),
                         cuda::SoftmaxVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::soft_target_cross_entropy_backward(
                        e.outer, e.C, e.inner, prob.data<float>(), targets.data<float>(),
                        top_grad.data<float>(), options, dlogits.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::soft_target_cross_entropy_backward(
                 e.outer, e.C, e.inner, prob.data<double>(), targets.data<double>(), options,
                 top_grad.data<double>()[0] / normalizer(e, options), dlogits.data<double>());
           }));
}

}  // namespace crema::kernels
