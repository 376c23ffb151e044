// Pointwise losses: a term per element, summed, normalized, kept on the device. Two of them:
// sigmoid cross-entropy (Caffe's SigmoidCrossEntropyLoss, PyTorch's BCEWithLogitsLoss) and the
// Euclidean (squared-error) loss (Caffe's EuclideanLoss, PyTorch's MSELoss up to a factor).
// Also the loss normalizations that every loss shares (softmax.h's cross-entropy too).
//
// Tensors are viewed as [outer, inner] with outer = the first extent (Caffe's `num`, the batch)
// and inner the rest; n = outer * inner.
//
// Sigmoid cross-entropy, logits x and targets t (probabilities, usually 0 or 1), of n elements:
//   loss = (1 / normalizer) * sum over counted k of  max(x_k, 0) - x_k t_k + log(1 + exp(-|x_k|))
//   dx_k = top_grad[0] / normalizer * (sigmoid(x_k) - t_k)  at counted k, 0 at ignored ones
// which is -t log(sigmoid(x)) - (1 - t) log(1 - sigmoid(x)) written so that exp never overflows
// and the log never sees 0. An element is counted unless has_ignore_label and t_k equals
// ignore_label (compared as floats). The default normalization is batch_size (Caffe's default for
// this layer); `full` gives PyTorch's BCEWithLogitsLoss(reduction='mean'), `none` its 'sum'.
//
// Euclidean loss, a and b of n elements (Caffe's definition, the 1/2 making the gradient the plain
// difference):
//   loss  = 1 / (2 normalizer) * sum_k (a_k - b_k)^2
//   da_k  =  top_grad[0] / normalizer * (a_k - b_k)
//   db_k  = -top_grad[0] / normalizer * (a_k - b_k)
// The default normalization is batch_size (Caffe: sum / 2N). PyTorch's MSELoss(reduction='mean')
// is `full` with a loss weight of 2 (sum / numel); 'sum' is `none` with a loss weight of 2.
//
// Normalizers (Caffe's LossParameter.normalization), from the number of counted elements:
//   valid:       the counted elements, at least 1 (every element when nothing is ignored)
//   batch_size:  outer
//   full:        outer * inner, ignored elements included
//   none:        1
//
// The sums accumulate in double in a fixed order (fixed blocks on the CPU, fixed block partials
// and a fixed tree on the GPU; no float atomics): the same bits on every run, for any thread
// count. loss and top_grad are one-element tensors on the context's device, and the normalizer is
// computed there too, so a GPU training step never waits for the host.
#pragma once

#include <cstdint>
#include <string>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class LossNormalization { valid, batch_size, full, none };

// The normalizer above, given the number of counted positions.
int64_t loss_normalizer(LossNormalization normalization, int64_t outer, int64_t inner,
                        int64_t counted);
// From the YAML name ("valid", "batch_size", "full", "none"); false for any other name.
bool parse_loss_normalization(const std::string& name, LossNormalization& normalization);

struct SigmoidCrossEntropyOptions {
  bool has_ignore_label = false;
  int ignore_label = -1;
  LossNormalization normalization = LossNormalization::batch_size;
};

namespace ref {
// The definitions before normalization, in T; the oracle of the tests. Explicitly instantiated
// for float and double.
// Returns the sum of the terms over counted elements; writes their number when not null.
template <class T>
double sigmoid_cross_entropy_forward(int64_t n, const T* x, const T* t,
                                     const SigmoidCrossEntropyOptions& options, int64_t* counted);
// dx = scale * (sigmoid(x) - t), 0 at ignored elements.
template <class T>
void sigmoid_cross_entropy_backward(int64_t n, const T* x, const T* t,
                                    const SigmoidCrossEntropyOptions& options, T scale, T* dx);
// Returns sum_k (a_k - b_k)^2 (no 1/2, no normalizer).
template <class T>
double euclidean_loss_forward(int64_t n, const T* a, const T* b);
// da = scale * (a - b), db = -scale * (a - b); either may be null.
template <class T>
void euclidean_loss_backward(int64_t n, const T* a, const T* b, T scale, T* da, T* db);
}  // namespace ref

namespace cpu {
// Normalized as at the top, on up to `num_threads` OpenMP threads: loss[0] = float(sum /
// normalizer) (Euclidean: sum / (2 normalizer)), the sum in double over fixed blocks added in
// order; the backward reads top_grad[0].
void sigmoid_cross_entropy_forward(int64_t outer, int64_t inner, const float* x, const float* t,
                                   const SigmoidCrossEntropyOptions& options, float* loss,
                                   int num_threads);
void sigmoid_cross_entropy_backward(int64_t outer, int64_t inner, const float* x, const float* t,
                                    const float* top_grad,
                                    const SigmoidCrossEntropyOptions& options, float* dx,
                                    int num_threads);
void euclidean_loss_forward(int64_t outer, int64_t inner, const float* a, const float* b,
                            LossNormalization normalization, float* loss, int num_threads);
void euclidean_loss_backward(int64_t outer, int64_t inner, const float* a, const float* b,
                             const float* top_grad, LossNormalization normalization, float* da,
                             float* db, int num_threads);
}  // namespace cpu

namespace cuda {
// One version each (see README.md): the forwards are a grid-stride pass accumulating the terms in
// double per thread, then block partials reduced in a fixed tree (kernels/elementwise/
// reduce_cuda.cuh); the backwards one thread per element. loss and top_grad: one float on the
// device. `workspace`: pointwise_loss_workspace_bytes(n) bytes of device scratch (none for
// small n).
size_t pointwise_loss_workspace_bytes(int64_t n);
void sigmoid_cross_entropy_forward(int64_t outer, int64_t inner, const float* x, const float* t,
                                   const SigmoidCrossEntropyOptions& options, float* loss,
                                   void* workspace, gpu::Stream stream);
void sigmoid_cross_entropy_backward(int64_t outer, int64_t inner, const float* x, const float* t,
                                    const float* top_grad,
                                    const SigmoidCrossEntropyOptions& options, float* dx,
                                    void* workspace, gpu::Stream stream);
void euclidean_loss_forward(int64_t outer, int64_t inner, const float* a, const float* b,
                            LossNormalization normalization, float* loss, void* workspace,
                            gpu::Stream stream);
void euclidean_loss_backward(int64_t outer, int64_t inner, const float* a, const float* b,
                             const float* top_grad, LossNormalization normalization, float* da,
                             float* db, gpu::Stream stream);
}  // namespace cuda

// Tensor level: float32 tensors on the context's device (float64 on the CPU: the reference,
// normalized as the float32 paths are); the second input (targets, b) has as
// many elements as the first (any shape, as Caffe); dx, da, db the shape of their input; loss and
// top_grad one element. Throws crema::Error naming the tensors when they do not fit. da or db may
// be null (that gradient is not wanted).
void sigmoid_cross_entropy_forward(Context& ctx, const Tensor& x, const Tensor& targets,
                                   Tensor& loss, const SigmoidCrossEntropyOptions& options);
void sigmoid_cross_entropy_backward(Context& ctx, const Tensor& x, const Tensor& targets,
                                    const Tensor& top_grad,
                                    const SigmoidCrossEntropyOptions& options, Tensor& dx);
void euclidean_loss_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& loss,
                            LossNormalization normalization);
void euclidean_loss_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& top_grad,
                             LossNormalization normalization, Tensor* da, Tensor* db);

}  // namespace crema::kernels
