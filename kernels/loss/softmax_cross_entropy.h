// Softmax fused with the cross-entropy loss (Caffe's SoftmaxWithLoss, with PyTorch's label
// smoothing). The softmax, its [outer, C, inner] view around `axis` and its CUDA versions are
// kernels/softmax/softmax.h's.
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
// prob may alias logits.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/loss/loss.h"
#include "kernels/softmax/softmax.h"

namespace crema::kernels {

struct SoftmaxLossOptions {
  int axis = 1;
  bool has_ignore_label = false;
  int ignore_label = -1;
  LossNormalization normalization = LossNormalization::valid;
  float label_smoothing = 0.0f;  // eps in [0, 1)
};

namespace ref {
// The definition before normalization, the oracle of the tests, on [outer, C, inner] arrays.
// Labels must be valid (the Tensor-level functions check them). Explicitly instantiated for
// float and double. The forward returns the SUM of the terms over counted positions (and their
// number), the backward takes the factor `scale` = top_grad / normalizer.
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
// Normalized as at the top, on up to `num_threads` OpenMP threads: loss[0] = float(sum /
// normalizer), the sum accumulated in double in a fixed order (it does not depend on the thread
// count); dlogits with the factor top_grad[0] / float(normalizer).
void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, int num_threads);
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    int num_threads);
}  // namespace cpu

namespace cuda {
// The softmax versions (SoftmaxVersion) with the loss term taken in the same pass; the forward
// loss is reduced in a fixed order (kernels/common/reduce_cuda.cuh): the same bits on every run.
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

// Tensor level: logits, prob and dlogits of one shape, float32 on the context's device or float64
// on the CPU (the reference, normalized as the float32 paths are); labels of that dtype with
// outer*inner elements; loss and top_grad tensors of one element (any shape). Throws
// crema::Error naming the tensors when they do not fit or the axis is out of range, and, on the
// CPU, for a label that is neither an integer in [0, C) nor the ignore_label, naming its value
// and position (on a GPU the loss becomes NaN instead), and for a label_smoothing outside [0, 1).
void softmax_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                   Tensor& prob, Tensor& loss, const SoftmaxLossOptions& options);
void softmax_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& labels,
                                    const Tensor& top_grad, const SoftmaxLossOptions& options,
                                    Tensor& dlogits);

}  // namespace crema::kernels
