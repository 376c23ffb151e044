// Top-k accuracy, dispatch: checks the tensors, the axis and top_k once (and, on the CPU, every
// label), then runs the CPU or the CUDA path.
#include "kernels/accuracy/accuracy.h"

#include <cmath>
#include <sstream>
#include <string>

#include "core/error.h"

namespace crema::kernels {

void accuracy(Context& ctx, const Tensor& scores, const Tensor& labels,
              const AccuracyOptions& options, Tensor& out) {
  if (!scores.defined() || scores.dtype() != DType::f32 || scores.device() != ctx.device()) {
    throw Error("accuracy: scores is " +
                (scores.defined() ? scores.description() : std::string("undefined")) +
                ", expected f32 on " + ctx.device().str());
  }
  const int n = scores.ndim(), axis = options.axis;
  if (axis < -n || axis >= n) {
    throw Error("accuracy: axis " + std::to_string(axis) + " is out of range for scores " +
                scores.description());
  }
  const int a = axis < 0 ? axis + n : axis;
  const int64_t outer = shape_count(scores.shape(), 0, a), C = scores.shape()[size_t(a)];
  const int64_t inner = shape_count(scores.shape(), a + 1, n);
  if (options.top_k < 1 || options.top_k > C) {
    throw Error("accuracy: top_k " + std::to_string(options.top_k) + " must be in [1, " +
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
  if (!out.defined() || out.dtype() != DType::f32 || out.device() != ctx.device() ||
      out.numel() != 1) {
    throw Error("accuracy: out is " +
                (out.defined() ? out.description() : std::string("undefined")) +
                ", expected an f32 tensor of one element on " + ctx.device().str());
  }
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const size_t bytes = cuda::accuracy_workspace_bytes(outer * inner);
    void* workspace = bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
    cuda::accuracy(outer, C, inner, scores.data<float>(), labels.data<float>(), options.top_k,
                   options.has_ignore_label, options.ignore_label, out.data<float>(), workspace,
                   ctx.stream());
    return;
  }
#endif
  const float* l = labels.data<float>();
  for (int64_t j = 0; j < outer * inner; ++j) {
    const float v = l[j];
    if (options.has_ignore_label && v == float(options.ignore_label)) continue;
    if (!(v >= 0.0f && v < float(C) && v == std::floor(v))) {
      std::ostringstream message;
      message << "accuracy: label " << v << " at position " << j << " is not a class index in [0, "
              << C << ")";
      if (options.has_ignore_label) message << " nor the ignore_label " << options.ignore_label;
      throw Error(message.str());
    }
  }
  const AccuracyCount count =
      cpu::accuracy(outer, C, inner, scores.data<float>(), l, options.top_k,
                    options.has_ignore_label, options.ignore_label, ctx.num_threads());
  out.data<float>()[0] =
      count.counted > 0 ? float(double(count.correct) / double(count.counted)) : 0.0f;
}

}  // namespace crema::kernels
