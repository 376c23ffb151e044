// Top-k accuracy, dispatch: checks the tensors, the axis and top_k once (and, on the CPU, every
// label), then runs the path for the device and dtype (float32: cpu:: or cuda::; float64 on the
// CPU: the reference).
#include "kernels/accuracy/accuracy.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"
#include "kernels/softmax/softmax.h"

namespace crema::kernels {
namespace {

// Every label is a class index in [0, C) or the ignore_label (the CPU paths trust this).
template <class T>
void check_labels(int64_t positions, int64_t C, const T* labels, const AccuracyOptions& options) {
  for (int64_t j = 0; j < positions; ++j) {
    const T v = labels[j];
    if (options.has_ignore_label && v == T(options.ignore_label)) continue;
    if (!(v >= T(0) && v < T(C) && v == std::floor(v))) {
      std::ostringstream message;
      message << "accuracy: label " << v << " at position " << j << " is not a class index in [0, "
              << C << ")";
      if (options.has_ignore_label) message << " nor the ignore_label " << options.ignore_label;
      throw Error(message.str());
    }
  }
}

// correct / counted, or 0 when nothing is counted.
template <class T>
T ratio(const AccuracyCount& count) {
  return count.counted > 0 ? T(double(count.correct) / double(count.counted)) : T(0);
}

}  // namespace

void accuracy(Context& ctx, const Tensor& scores, const Tensor& labels,
              const AccuracyOptions& options, Tensor& out) {
  const char* op = "accuracy";
  const DType dtype = scores.dtype();
  check_tensor(ctx, op, "scores", scores, scores.shape(), dtype);
  const int n = scores.ndim(), axis = options.axis;
  if (axis < -n || axis >= n) {
    throw Error("accuracy: axis " + std::to_string(axis) + " is out of range for scores " +
                scores.description());
  }
  const int a = axis < 0 ? axis + n : axis;
  const int64_t outer = shape_count(scores.shape(), 0, a), C = scores.shape()[size_t(a)];
  const int64_t inner = shape_count(scores.shape(), a + 1, n), positions = outer * inner;
  if (options.top_k < 1 || options.top_k > C) {
    throw Error("accuracy: top_k " + std::to_string(options.top_k) + " must be in [1, " +
                std::to_string(C) + "] for scores " + scores.description());
  }
  check_numel(ctx, op, "labels", labels, positions,
              "position of scores " + scores.description() + " along axis " + std::to_string(axis),
              dtype);
  check_scalar(ctx, op, "out", out, dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     void* workspace =
                         workspace_for(ctx, cuda::accuracy_workspace_bytes(positions));
                     cuda::accuracy(outer, C, inner, scores.data<float>(), labels.data<float>(),
                                    options.top_k, options.has_ignore_label, options.ignore_label,
                                    out.data<float>(), workspace, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    check_labels(positions, C, labels.data<float>(), options);
                    out.data<float>()[0] = ratio<float>(cpu::accuracy(
                        outer, C, inner, scores.data<float>(), labels.data<float>(), options.top_k,
                        options.has_ignore_label, options.ignore_label, ctx.num_threads()));
                  }),
           on_cpu(DType::f64, [&] {
             check_labels(positions, C, labels.data<double>(), options);
             out.data<double>()[0] = ratio<double>(
                 ref::accuracy(outer, C, inner, scores.data<double>(), labels.data<double>(),
                               options.top_k, options.has_ignore_label, options.ignore_label));
           }));
}

void target_labels(Context& ctx, const Tensor& targets, int axis, Tensor& labels) {
  const char* op = "target_labels";
  const DType dtype = targets.dtype();
  const SoftmaxExtents e = softmax_extents(op, targets, axis);
  check_tensor(ctx, op, "targets", targets, targets.shape(), dtype);
  check_numel(ctx, op, "labels", labels, e.outer * e.inner,
              "position of targets " + targets.description(), dtype);
  dispatch(ctx, op, dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::target_labels(e.outer, e.C, e.inner, targets.data<float>(),
                                         labels.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    ref::target_labels(e.outer, e.C, e.inner, targets.data<float>(),
                                       labels.data<float>());
                  }),
           on_cpu(DType::f64, [&] {
             ref::target_labels(e.outer, e.C, e.inner, targets.data<double>(),
                                labels.data<double>());
           }));
}

}  // namespace crema::kernels
