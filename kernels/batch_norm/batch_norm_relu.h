// Batch normalization fused with a ReLU, and with a residual add before the ReLU: the two ends of
// every ResNet block (conv-BN-ReLU, and conv-BN, + shortcut, ReLU), in one pass each way.
//
// With z = gamma * (x - mean) * invstd + beta, the batch norm of batch_norm.h (same statistics,
// same running averages, same [N, C, S] view), the fused forward writes
//   y = relu(z)            (r absent)
//   y = relu(z + r)        (r: the residual, x's shape)
// and the backward, from dy, takes the ReLU's mask from y where it is given, else from z
// recomputed from x and the saved statistics:
//   dv = dy where y > 0 (or z > 0), else 0     the gradient at the ReLU's input
//   dr = dv                                    the residual's gradient (coefficient 1)
//   dx, dgamma, dbeta = batch_norm_backward with dv in place of dy
// y > 0 exactly where the ReLU's input v = z (+ r) is, as y = v there and +-0 or NaN elsewhere
// (rounded to bf16 or f16, a positive v below the type's least subnormal gives y = 0: the unfused
// chain's ReLU, which masks by its y as well, gives the same). So the backward of the form with a
// residual reads y, never r: r dies at the forward (ResNet's downsampling shortcut: its
// BatchNorm's output), while y is the block's output, which the next block's backward reads
// anyway. Without a residual the mask is recomputed from x: y is not read at all.
// Every number is the one the unfused chain BatchNorm -> (Eltwise SUM ->) ReLU computes, bit for
// bit, on the CPU and on the GPU: the statistics and gradient sums are the batch norm kernels' own
// (the same templates, the same reduction order), z is the same expression, the sum is the
// Eltwise's ((0 + z) + r) and the ReLU's select is ReLU's (x > 0 ? x : 0 * x, so -0 and NaN
// come out as they do there). README.md counts the bytes each pass moves against the chain.
//
// x_copy (optional): the forward also writes x there, in the pass that writes y. A caller that
// runs in place (y over x) keeps x for the backward that way. y may alias x; dx may alias dy.
// gamma, beta absent: 1 and 0 (affine: false). dx, dr, dgamma, dbeta absent: not wanted.
// The backward's y: the forward's output, required when the forward had a residual (dr then
// needs it); absent, the mask is z > 0, which is right only for the form without one.
#pragma once

#include "kernels/batch_norm/batch_norm.h"

namespace crema::kernels {

namespace ref {
// The oracle: batch_norm.h's reference, then the add and the ReLU, in T (float or double).
template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const T* gamma, const T* beta, T eps, T momentum, T* y,
                                      T* x_copy, T* save_mean, T* save_invstd, T* running_mean,
                                      T* running_var, T* num_batches_tracked);
template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const T* gamma, const T* beta, const T* running_mean,
                                       const T* running_var, T eps, T* y, T* x_copy, T* save_mean,
                                       T* save_invstd);
template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const T* gamma, const T* beta, const T* save_mean,
                              const T* save_invstd, bool batch_stats, T* dx, T* dr, T* dgamma,
                              T* dbeta);
}  // namespace ref

// The fast paths, templated on the activations' storage type T (x, r, y, x_copy, dy, dx, dr),
// with float parameters and statistics and float arithmetic; cpu:: is instantiated for float,
// cuda:: for float, bf16_t and f16_t.
namespace cpu {
template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const float* gamma, const float* beta, float eps,
                                      float momentum, T* y, T* x_copy, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var,
                                      float* num_batches_tracked, int num_threads);
template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float eps, T* y, T* x_copy, float* save_mean,
                                       float* save_invstd, int num_threads);
template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, bool batch_stats, T* dx, T* dr,
                              float* dgamma, float* dbeta, int num_threads);
}  // namespace cpu

namespace cuda {
// The kernels of `version` (production passes batch_norm_version_for(s): split_channel's two
// launches each way, rows_tiled's three where S == 1; not block_per_channel), with
// batch_norm_workspace_bytes(s, version) of scratch; the inference forward is one elementwise
// launch.
template <class T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* x, const T* r,
                                      const float* gamma, const float* beta, float eps,
                                      float momentum, T* y, T* x_copy, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var,
                                      float* num_batches_tracked, void* workspace,
                                      BatchNormVersion version, gpu::Stream stream);
template <class T>
void batch_norm_relu_forward_inference(const BatchNormShape& s, const T* x, const T* r,
                                       const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float eps, T* y, T* x_copy, float* save_mean,
                                       float* save_invstd, gpu::Stream stream);
template <class T>
void batch_norm_relu_backward(const BatchNormShape& s, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, bool batch_stats, T* dx, T* dr,
                              float* dgamma, float* dbeta, void* workspace,
                              BatchNormVersion version, gpu::Stream stream);
}  // namespace cuda

// Tensor level, as batch_norm.h's functions with the extra tensors: r, x_copy, the backward's y,
// dr of x's shape, dtype and layout, or undefined (absent); dtypes, layouts and devices as there.
void batch_norm_relu_forward_training(Context& ctx, const Tensor& x, const Tensor& r,
                                      const Tensor& gamma, const Tensor& beta, float eps,
                                      float momentum, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                      Tensor& save_invstd, Tensor& running_mean,
                                      Tensor& running_var, Tensor& num_batches_tracked);
void batch_norm_relu_forward_inference(Context& ctx, const Tensor& x, const Tensor& r,
                                       const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var,
                                       float eps, Tensor& y, Tensor& x_copy, Tensor& save_mean,
                                       Tensor& save_invstd);
void batch_norm_relu_backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                              const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                              const Tensor& save_invstd, bool batch_stats, Tensor& dx, Tensor& dr,
                              Tensor& dgamma, Tensor& dbeta);

}  // namespace crema::kernels
