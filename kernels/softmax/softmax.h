// Softmax along one axis, and softmax fused with the cross-entropy loss (Caffe's SoftmaxWithLoss).
//
// A tensor is viewed as [outer, C, inner] around `axis` (C = its extent; outer and inner the
// products of the extents before and after it; axis may be negative, counting from the end).
// For every (o, i):
//   softmax:   y[o,c,i] = exp(x[o,c,i] - m) / sum_c' exp(x[o,c',i] - m),   m = max_c x[o,c,i]
// Subtracting the max changes nothing mathematically and keeps exp from overflowing.
//   backward:  dx[o,c,i] = y[o,c,i] * (dy[o,c,i] - sum_c' dy[o,c',i] * y[o,c',i])
//
// Cross-entropy: labels hold one class index per position, label[o*inner + i] in [0, C) (as
// float32; any shape with outer*inner elements). With prob = softmax(logits):
//   loss     = sum over counted positions of -log(max(prob[o, label, i], FLT_MIN))
//   dlogits  = scale * (prob - onehot(label))  at counted positions, 0 at ignored ones
// A position is counted unless has_ignore_label and its label equals ignore_label. The loss is
// returned as a SUM in double together with the count; the layer divides by whatever its
// normalization says (Caffe's VALID, BATCH_SIZE, ...) and passes that factor back as `scale`.
// FLT_MIN keeps a probability that underflowed to 0 from giving an infinite loss.
//
// y may alias x (in-place softmax), dx may alias dy, and prob may alias logits.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace crema::kernels {

struct SoftmaxLossOptions {
  int axis = 1;
  bool has_ignore_label = false;
  int ignore_label = -1;
};

namespace ref {
// Plain loops on [outer, C, inner] arrays; the oracle of the tests. Labels must be valid (the
// Tensor-level functions check them). Explicitly instantiated for float and double.
template <class T>
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx);
// Returns the loss sum; writes prob and, when not null, the number of counted positions.
// options.axis is not used: the caller has already folded the shape into outer, C, inner.
template <class T>
double softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const T* logits,
                                     const T* labels, const SoftmaxLossOptions& options, T* prob,
                                     int64_t* valid_count);
template <class T>
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const T* prob,
                                    const T* labels, const SoftmaxLossOptions& options, T scale,
                                    T* dlogits);
}  // namespace ref

namespace cpu {
// The same on up to `num_threads` OpenMP threads; the loss sum is accumulated in a fixed order,
// so it does not depend on the thread count.
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads);
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, int num_threads);
double softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                     const float* labels, const SoftmaxLossOptions& options,
                                     float* prob, int64_t* valid_count, int num_threads);
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const SoftmaxLossOptions& options,
                                    float scale, float* dlogits, int num_threads);
}  // namespace cpu

// Tensor level: x and y (y, dy, dx; logits and prob) of one shape, float32, on the context's
// device. Throws crema::Error naming the tensors when they do not fit, when the axis is out of
// range, and (cross-entropy) for a label that is neither an integer in [0, C) nor the
// ignore_label, naming its value and position.
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
// valid_count may be null.
double softmax_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                     Tensor& prob, const SoftmaxLossOptions& options,
                                     int64_t* valid_count);
void softmax_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& labels,
                                    const SoftmaxLossOptions& options, float scale,
                                    Tensor& dlogits);

}  // namespace crema::kernels
