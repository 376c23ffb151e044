// Softmax and log-softmax along one axis, and softmax fused with the cross-entropy loss (Caffe's
// SoftmaxWithLoss, with PyTorch's label smoothing).
//
// A tensor is viewed as [outer, C, inner] around `axis` (C = its extent; outer and inner the
// products of the extents before and after it; axis may be negative, counting from the end).
// For every (o, i), with m = max_c x[o,c,i], z = x - m and s = sum_c exp(z[o,c,i]):
//   softmax:       y[o,c,i] = exp(z[o,c,i]) / s
//   log-softmax:   y[o,c,i] = z[o,c,i] - log(s)
// Subtracting the max changes nothing mathematically and keeps exp from overflowing; log-softmax
// never takes the log of an underflowed probability, so it is finite wherever x is.
//   softmax backward:      dx[o,c,i] = y[o,c,i] * (dy[o,c,i] - sum_c' dy[o,c',i] * y[o,c',i])
//   log-softmax backward:  dx[o,c,i] = dy[o,c,i] - exp(y[o,c,i]) * sum_c' dy[o,c',i]
//
// Cross-entropy: labels hold one class index per position, label[o*inner + i] in [0, C) (as
// float32; any shape with outer*inner elements). With prob = softmax(logits):
//   loss     = -(1 / normalizer) * sum over counted positions (o, i) of
//                                    log(max(prob[o, label, i], FLT_MIN))
//   dlogits  = top_grad[0] / normalizer * (prob - onehot(label))  at counted positions,
//              0 at ignored ones
// A position is counted unless has_ignore_label and its label equals ignore_label. The
// normalizer (Caffe's LossParameter.normalization, kernels/loss/loss.h) is
//   valid:       the number of counted positions, at least 1 (the default)
//   batch_size:  outer
//   full:        outer * inner, ignored positions included
//   none:        1
// top_grad holds the gradient flowing into the loss (its loss weight, in a Net). loss and
// top_grad are one-element tensors on the device, and the normalizer is computed there too: a GPU
// training step never reads a number back to the host, so it can be captured as a CUDA graph.
// FLT_MIN keeps a probability that underflowed to 0 from giving an infinite loss (a NaN
// probability still gives a NaN loss).
//
// Label smoothing eps in [0, 1) (PyTorch's CrossEntropyLoss(label_smoothing=eps)): a counted
// position's target is t_c = (1 - eps) [c == label] + eps / C, its term -sum_c t_c log prob_c
// taken from the log-softmax of the logits (no FLT_MIN clamp, as PyTorch):
//   term     = log(s) - (1 - eps) z[label] - (eps / C) sum_c z[c]    (every part >= 0)
//   dlogits  = top_grad[0] / normalizer * (prob - t)
// Ignored positions are left out of the sum and of the `valid` count. eps = 0 is the form above.
//
// Labels that are neither an integer in [0, C) nor the ignore_label: the CPU path throws
// crema::Error naming the value and its position. A CUDA kernel cannot throw, and checking on the
// host would mean reading the labels back every step; instead such a position makes the loss NaN
// (and its dlogits NaN), which the trainer's non-finite-loss check reports and stops on.
//
// y may alias x (in-place softmax), dx may alias dy, and prob may alias logits.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/loss/loss.h"

namespace crema::kernels {

struct SoftmaxLossOptions {
  int axis = 1;
  bool has_ignore_label = false;
  int ignore_label = -1;
  LossNormalization normalization = LossNormalization::valid;
  float label_smoothing = 0.0f;  // eps in [0, 1)
};

namespace ref {
// Plain loops on [outer, C, inner] arrays; the oracle of the tests. Labels must be valid (the
// Tensor-level functions check them). Explicitly instantiated for float and double. The
// cross-entropy here is the definition before normalization: the forward returns the SUM of
// the terms over counted positions (and their number), the backward takes the factor
// `scale` = top_grad / normalizer.
template <class T>
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx);
template <class T>
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y);
template <class T>
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx);
// Returns the loss sum; writes prob and, when not null, the number of counted positions.
// options.axis and options.normalization are not used: the caller has already folded the shape
// into outer, C, inner, and divides.
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
// The same on up to `num_threads` OpenMP threads, the cross-entropy normalized as at the top:
// loss[0] = float(sum / normalizer), the sum accumulated in double in a fixed order (it does not
// depend on the thread count); dlogits with the factor top_grad[0] / float(normalizer).
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     int num_threads);
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, int num_threads);
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         int num_threads);
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, int num_threads);
void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, int num_threads);
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    int num_threads);
}  // namespace cpu

namespace cuda {
// thread_per_position: one thread walks a distribution's C classes (`inner` apart: coalesced
//   across threads when inner > 1, strided when inner == 1).
// warp_per_position: a warp per distribution, lanes over classes, max and sums by warp
//   butterflies (coalesced when inner == 1).
// by_shape: warp_per_position when inner == 1 and C > 16, thread_per_position otherwise.
// Log-softmax runs the same versions. The forward loss is reduced in a fixed order
// (kernels/common/reduce_cuda.cuh): the same bits on every run. See README.md.
enum class SoftmaxVersion { thread_per_position, warp_per_position, by_shape, best = by_shape };

void softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                     SoftmaxVersion version, gpu::Stream stream);
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                      float* dx, SoftmaxVersion version, gpu::Stream stream);
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                         SoftmaxVersion version, gpu::Stream stream);
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                          float* dx, SoftmaxVersion version, gpu::Stream stream);
// Device scratch the two functions below need (0 for small problems such as LeNet's).
size_t softmax_cross_entropy_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                             const SoftmaxLossOptions& options,
                                             SoftmaxVersion version);
// loss: one float on the device; labels are not checked (an invalid one gives a NaN loss).
void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, void* workspace,
                                   SoftmaxVersion version, gpu::Stream stream);
// One thread per element of dlogits (one version); top_grad: one float on the device.
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    void* workspace, gpu::Stream stream);
}  // namespace cuda

// Tensor level: x and y (y, dy, dx; logits, prob and dlogits) of one shape, float32, on the
// context's device; labels float32 with outer*inner elements; loss and top_grad float32 tensors
// of one element (any shape). Throws crema::Error naming the tensors when they do not fit or the
// axis is out of range, and, on the CPU, for a label that is neither an integer in [0, C) nor the
// ignore_label, naming its value and position (on a GPU the loss becomes NaN instead), and for a
// label_smoothing outside [0, 1).
void softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
void softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
void log_softmax_forward(Context& ctx, const Tensor& x, Tensor& y, int axis);
void log_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
void softmax_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor& prob, Tensor& loss, const SoftmaxLossOptions& options);
void softmax_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& labels,
                                    const Tensor& top_grad, const SoftmaxLossOptions& options,
                                    Tensor& dlogits);

}  // namespace crema::kernels
