// Top-k classification accuracy (Caffe's Accuracy layer).
//
// scores are viewed as [outer, C, inner] around `axis` (as softmax.h does), labels hold one class
// index per position: label[o*inner + i] in [0, C) (float32, any shape with outer*inner elements).
// A position is counted unless has_ignore_label and its label equals ignore_label; it is correct
// when fewer than top_k OTHER classes score at least as high as its label (BVLC Caffe's rule):
//   correct(o, i)  <=>  #{ c != label : scores[o,c,i] beats scores[o,label,i] } < top_k
// where a score beats the label's when it is greater or equal, or when either is NaN: a tie goes
// against the label, so a dead network (all scores equal) or a diverged one (NaN scores) reports
// 0 rather than a perfect accuracy.
//
// The Tensor-level function writes accuracy = correct / counted (0 when nothing is counted) into
// a one-element tensor on the device, so a GPU step never reads a number back to the host. The
// raw ref:: and cpu:: functions return the two counts (tests compare them exactly). A label that
// is neither an integer in [0, C) nor the ignore_label: the CPU path throws crema::Error naming
// its value and position; a CUDA kernel cannot throw, and makes the accuracy NaN instead.
//
// Soft targets (a probability per class, of the scores' shape: mixup's and cutmix's, or one-hot
// rows) name a position's label as their largest class, the first of equal ones (torch's
// argmax): target_labels writes those labels for accuracy() to score. A mixed target names the
// sample that weighs more (lambda > 1/2: its own), a one-hot row its label.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

struct AccuracyCount {
  int64_t correct = 0;
  int64_t counted = 0;
};

struct AccuracyOptions {
  int top_k = 1;
  int axis = 1;
  bool has_ignore_label = false;
  int ignore_label = -1;
};

namespace ref {
// Plain loops; labels must be valid (the Tensor-level function checks them). Explicitly
// instantiated for float and double.
template <class T>
AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const T* scores, const T* labels,
                       int top_k, bool has_ignore_label, int ignore_label);
// labels[o * inner + i] = the first c with the largest targets[o, c, i] (a NaN target is never
// the largest). Also the CPU's float32 path: one pass over the targets.
template <class T>
void target_labels(int64_t outer, int64_t C, int64_t inner, const T* targets, T* labels);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads (integer counts: the result does not depend on
// the thread count).
AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const float* scores,
                       const float* labels, int top_k, bool has_ignore_label, int ignore_label,
                       int num_threads);
}  // namespace cpu

namespace cuda {
// One thread per position; per-thread counts, a fixed tree per block and one finishing block
// when there are several (integer counts: exact in any order). One version. out: one float on
// the device; `workspace` holds accuracy_workspace_bytes(outer * inner) bytes (none for up to
// 256 positions).
size_t accuracy_workspace_bytes(int64_t positions);
void accuracy(int64_t outer, int64_t C, int64_t inner, const float* scores, const float* labels,
              int top_k, bool has_ignore_label, int ignore_label, float* out, void* workspace,
              gpu::Stream stream);
// One thread per position.
void target_labels(int64_t outer, int64_t C, int64_t inner, const float* targets, float* labels,
                   gpu::Stream stream);
}  // namespace cuda

// Tensor level: scores float32 on the context's device, options.axis in [-ndim, ndim),
// 1 <= options.top_k <= C, labels float32 with one element per position, out float32 with one
// element (or all three float64 on the CPU, which runs ref::). Throws crema::Error naming the
// tensors for a wrong shape, dtype or device, and (CPU) for a label that is neither an integer in
// [0, C) nor the ignore_label, naming its value and position.
void accuracy(Context& ctx, const Tensor& scores, const Tensor& labels,
              const AccuracyOptions& options, Tensor& out);

// Tensor level: targets float32 on the context's device (or float64 on the CPU), labels of their
// dtype with one element per position around `axis` (in [-ndim, ndim)). Throws crema::Error naming
// the tensors when they do not fit.
void target_labels(Context& ctx, const Tensor& targets, int axis, Tensor& labels);

}  // namespace crema::kernels
