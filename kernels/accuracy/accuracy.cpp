// Top-k accuracy, dispatch: checks the tensors, the axis, top_k and the labels once, then runs
// the CPU path.
#include "kernels/accuracy/accuracy.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"

namespace crema::kernels {

AccuracyCount accuracy(Context& ctx, const Tensor& scores, const Tensor& labels, int top_k,
                       int axis, bool has_ignore_label, int ignore_label) {
  if (!ctx.device().is_cpu()) {
    throw Error("accuracy: no version for " + ctx.device().str() + " yet");
  }
  if (!scores.defined() || scores.dtype() != DType::f32 || scores.device() != ctx.device()) {
    throw Error("accuracy: scores is " +
                (scores.defined() ? scores.description() : std::string("undefined")) +
                ", expected f32 on " + ctx.device().str());
  }
  const int n = scores.ndim();
  if (axis < -n || axis >= n) {
    throw Error("accuracy: axis " + std::to_string(axis) + " is out of range for scores " +
                scores.description());
  }
  const int a = axis < 0 ? axis + n : axis;
  const int64_t outer = shape_count(scores.shape(), 0, a), C = scores.shape()[size_t(a)];
  const int64_t inner = shape_count(scores.shape(), a + 1, n);
  if (top_k < 1 || top_k > C) {
    throw Error("accuracy: top_k " + std::to_string(top_k) + " must be in [1, " +
                std::to_string(C) + "] for scores " + scores.description());
  }
  if (!labels.defined() || labels.dtype() != DType::f32 || labels.device() != ctx.device() ||
      labels.numel() != outer * inner) {
    throw Error("accuracy: labels is " +
                (labels.defined() ? labels.description() : std::string("undefined")) +
                ", expected f32 with " + std::to_string(outer * inner) + " elements (one per " +
                "position of scores " + scores.description() + " along axis " +
                std::to_string(axis) + ")");
  }
  const float* l = labels.data<float>();
  for (int64_t j = 0; j < outer * inner; ++j) {
    const float v = l[j];
    if (has_ignore_label && v == float(ignore_label)) continue;
    if (!(v >= 0.0f && v < float(C) && v == std::floor(v))) {
      std::ostringstream message;
      message << "accuracy: label " << v << " at position " << j << " is not a class index in [0, "
              << C << ")";
      if (has_ignore_label) message << " nor the ignore_label " << ignore_label;
      throw Error(message.str());
    }
  }
  return cpu::accuracy(outer, C, inner, scores.data<float>(), l, top_k, has_ignore_label,
                       ignore_label, ctx.num_threads());
}

}  // namespace crema::kernels
