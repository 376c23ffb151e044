// Softmax cross-entropy against soft targets: a probability per class instead of a class index
// (torch.nn.functional.cross_entropy with probability targets), the loss that mixup and cutmix
// train with (data/batch_mix.h). The softmax and its [outer, C, inner] view around `axis` are
// kernels/softmax/softmax.h's; the targets have the logits' shape.
//
// With z = x - max_c x (per position), s = sum_c exp z_c, log prob_c = z_c - log s, and the
// targets smoothed as torch smooths them, t'_c = (1 - eps) t_c + eps / C:
//   term(o, i) = -sum_c t'_c log prob_c = T log s - sum_c t'_c z_c,    T = sum_c t'_c
//   loss       = (1 / normalizer) * sum over every position (o, i) of term(o, i)
//   dlogits_k  = top_grad[0] / normalizer * (prob_k T - t'_k)
// (d term / d x_k = -t'_k + sum_c t'_c prob_k: the log-softmax's Jacobian is I - prob). Targets
// from one-hot rows or from mixing sum to 1, and then dlogits = scale * (prob - t'); the general
// form keeps torch's gradient for targets that do not (torch takes them as given).
// Every position counts: there is no ignore_label (torch refuses ignore_index with probability
// targets), so the `valid` normalizer is outer * inner, as `full`; batch_size is outer, none 1.
// torch's reduction='mean' is `valid`.
//
// No FLT_MIN clamp is needed: the term is built from the log-softmax, never log(prob). A logit of
// -inf with a zero target gives 0 * -inf = NaN, as in torch. prob may alias logits.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/loss/softmax_cross_entropy.h"

namespace crema::kernels {

namespace ref {
// The definition, one position at a time, accumulating in double (the tests' oracle); returns
// the SUM of the terms. options.axis, normalization and the ignore_label are not used here.
// Explicitly instantiated for float and double.
template <class T>
double soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const T* logits,
                                         const T* targets, const SoftmaxLossOptions& options,
                                         T* prob);
// dlogits = scale * (prob T - t'), scale = top_grad / normalizer.
template <class T>
void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const T* prob,
                                        const T* targets, const SoftmaxLossOptions& options,
                                        T scale, T* dlogits);
}  // namespace ref

namespace cpu {
// Normalized; on up to `num_threads` OpenMP threads over fixed tasks whose sums are added in task
// order, so the loss does not depend on the thread count.
void soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                       const float* targets, const SoftmaxLossOptions& options,
                                       float* prob, float* loss, int num_threads);
void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                        const float* targets, const float* top_grad,
                                        const SoftmaxLossOptions& options, float* dlogits,
                                        int num_threads);
}  // namespace cpu

namespace cuda {
// A thread or a warp per position as `version` chooses (the softmax's rule), the loss reduced in
// a fixed order: the same bits on every run. loss and top_grad: one float on the device.
size_t soft_target_cross_entropy_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                                 SoftmaxVersion version);
void soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                       const float* targets, const SoftmaxLossOptions& options,
                                       float* prob, float* loss, void* workspace,
                                       SoftmaxVersion version, gpu::Stream stream);
void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                        const float* targets, const float* top_grad,
                                        const SoftmaxLossOptions& options, float* dlogits,
                                        SoftmaxVersion version, gpu::Stream stream);
}  // namespace cuda

// Tensor level: logits, targets, prob and dlogits of one shape, float32 on the context's device
// or float64 on the CPU (the reference, normalized as the float32 paths are); loss and top_grad of
// one element. Throws crema::Error naming the tensors when they do not fit, for an axis out of
// range, a label_smoothing outside [0, 1) or an ignore_label (which soft targets cannot have).
void soft_target_cross_entropy_forward(Context& ctx, const Tensor& logits, const Tensor& targets,
                                       Tensor& prob, Tensor& loss,
                                       const SoftmaxLossOptions& options);
void soft_target_cross_entropy_backward(Context& ctx, const Tensor& prob, const Tensor& targets,
                                        const Tensor& top_grad, const SoftmaxLossOptions& options,
                                        Tensor& dlogits);

}  // namespace crema::kernels
