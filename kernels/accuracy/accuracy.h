// Top-k classification accuracy (Caffe's Accuracy layer), counted rather than averaged.
//
// scores are viewed as [outer, C, inner] around `axis` (as softmax.h does), labels hold one class
// index per position: label[o*inner + i] in [0, C) (float32, any shape with outer*inner elements).
// A position is counted unless has_ignore_label and its label equals ignore_label; it is correct
// when fewer than top_k OTHER classes score at least as high as its label (BVLC Caffe's rule):
//   correct(o, i)  <=>  #{ c != label : scores[o,c,i] beats scores[o,label,i] } < top_k
// where a score beats the label's when it is greater or equal, or when either is NaN: a tie goes
// against the label, so a dead network (all scores equal) or a diverged one (NaN scores) reports
// 0 rather than a perfect accuracy. The layer divides correct by counted.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace crema::kernels {

struct AccuracyCount {
  int64_t correct = 0;
  int64_t counted = 0;
};

namespace ref {
// Plain loops; labels must be valid (the Tensor-level function checks them). Explicitly
// instantiated for float and double.
template <class T>
AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const T* scores, const T* labels,
                       int top_k, bool has_ignore_label, int ignore_label);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads (integer counts: the result does not depend on
// the thread count).
AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const float* scores,
                       const float* labels, int top_k, bool has_ignore_label, int ignore_label,
                       int num_threads);
}  // namespace cpu

// Tensor level: scores float32 on the context's device, axis in [-ndim, ndim), 1 <= top_k <= C.
// Throws crema::Error naming the tensors for a wrong shape, dtype or device, and for a label that
// is neither an integer in [0, C) nor the ignore_label, naming its value and position.
AccuracyCount accuracy(Context& ctx, const Tensor& scores, const Tensor& labels, int top_k,
                       int axis, bool has_ignore_label, int ignore_label);

}  // namespace crema::kernels
