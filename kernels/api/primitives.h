// crema's primitives with cuDNN's surface: a handle (the Context: a device and a stream), strided
// tensor descriptors (tensor_desc.h) and a blend on every output,
//
//   y = alpha * op(inputs) + beta * y      (beta == 0: y is not read, NaN there never leaks)
//
// backward passes included (dx, dw, db, dgamma, dbeta are blended the same way, where the
// Tensor-level kernels accumulate parameter gradients). Every descriptor may be strided (a
// transposed view, a sub-region of a larger buffer, any non-overlapping strides) unless its
// parameter says "packed": those are refused with a message naming the tensor. The results equal
// those of the contiguous copies. Tensors are f32 (CPU and CUDA) or f64 (the CPU, which runs the
// reference), all of one dtype, on the context's device; everything runs on ctx.stream().
//
// Costs: an input packed in the layout the kernel reads (row-major, i.e. NCHW for 4-D; NHWC for
// convolution, pooling and spatial batch norm when their first activation is channels-last) is
// read in place; any other is gathered into scratch from the context's allocator first. An
// output packed likewise with alpha = 1, beta = 0 (or a kernel that blends itself: GEMM, the
// tensor ops, LCN) is written in place; any other is computed into scratch and blended in with
// one strided pass.
// stage.h has the rules; README.md how to add a primitive.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "kernels/activations/pointwise.h"
#include "kernels/api/tensor_desc.h"
#include "kernels/convolution/select.h"
#include "kernels/gemm/gemm.h"
#include "kernels/lcn/lcn.h"
#include "kernels/lrn/lrn.h"
#include "kernels/pooling/pooling.h"
#include "kernels/tensor_ops/tensor_ops_math.h"

namespace crema::kernels::api {

// ---- convolution: x [N, C, H, W], w [K, C/groups, R, S], y [N, K, P, Q] (P, Q from the
// geometry: kernels/convolution/convolution.h has the definition), db [K] or [1, K, 1, 1].
// `request` is cuDNN's algo argument: the heuristic's choice, a measured one, or a pinned
// algorithm, and the math (fp32, tf32, bf16) on a GPU (kernels/convolution/select.h).
struct ConvDesc {
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};
void convolution_forward(Context& ctx, const ConvDesc& conv, double alpha, const TensorDesc& x,
                         const TensorDesc& w, double beta, const TensorDesc& y,
                         const ConvRequest& request = {});
// dx = alpha * conv^T(dy, w) + beta * dx
void convolution_backward_data(Context& ctx, const ConvDesc& conv, double alpha,
                               const TensorDesc& w, const TensorDesc& dy, double beta,
                               const TensorDesc& dx, const ConvRequest& request = {});
// dw = alpha * sum_n corr(x, dy) + beta * dw
void convolution_backward_filter(Context& ctx, const ConvDesc& conv, double alpha,
                                 const TensorDesc& x, const TensorDesc& dy, double beta,
                                 const TensorDesc& dw, const ConvRequest& request = {});
// db = alpha * sum_{n,p,q} dy + beta * db
void convolution_backward_bias(Context& ctx, double alpha, const TensorDesc& dy, double beta,
                               const TensorDesc& db);

// ---- pooling: x [N, C, H, W], y [N, C, P, Q] (P, Q from y's dims; every window must overlap
// the input). The backward recomputes the max positions from x (cuDNN's y, dy, x -> dx).
struct PoolDesc {
  PoolMode mode = PoolMode::max;
  int64_t kernel_h = 2, kernel_w = 2, stride_h = 2, stride_w = 2, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // average only
};
void pooling_forward(Context& ctx, const PoolDesc& pool, double alpha, const TensorDesc& x,
                     double beta, const TensorDesc& y);
void pooling_backward(Context& ctx, const PoolDesc& pool, double alpha, const TensorDesc& y,
                      const TensorDesc& dy, const TensorDesc& x, double beta, const TensorDesc& dx);

// ---- activation, elementwise, any rank: relu (leaky with negative_slope), identity, and the
// pointwise kinds of kernels/activations/pointwise.h with their constants from `pointwise`
// (kind ignored). backward reads y or x as the kind needs (both are given, as cuDNN's).
enum class ActivationMode {
  relu,
  identity,
  sigmoid,
  tanh,
  clip,
  elu,
  swish,
  gelu_erf,
  gelu_tanh,
  hardsigmoid,
  hardswish,
  mish,
  softsign
};
struct ActivationDesc {
  ActivationMode mode = ActivationMode::relu;
  float negative_slope = 0.0f;  // relu
  Activation pointwise;         // alpha (elu), beta (swish), min / max (clip)
};
void activation_forward(Context& ctx, const ActivationDesc& act, double alpha, const TensorDesc& x,
                        double beta, const TensorDesc& y);
void activation_backward(Context& ctx, const ActivationDesc& act, double alpha, const TensorDesc& y,
                         const TensorDesc& dy, const TensorDesc& x, double beta,
                         const TensorDesc& dx);

// ---- softmax on x [N, C, ...]: over C at each (n, h, w) (channel mode) or over all of an
// image's C*H*W (instance mode); accurate (max subtracted), fast (no max) or log.
enum class SoftmaxAlgo { fast, accurate, log };
enum class SoftmaxMode { instance, channel };
void softmax_forward(Context& ctx, SoftmaxAlgo algo, SoftmaxMode mode, double alpha,
                     const TensorDesc& x, double beta, const TensorDesc& y);
void softmax_backward(Context& ctx, SoftmaxAlgo algo, SoftmaxMode mode, double alpha,
                      const TensorDesc& y, const TensorDesc& dy, double beta, const TensorDesc& dx);

// ---- local response normalization on [N, C, H, W] (kernels/lrn/lrn.h); the backward
// recomputes the forward's scale from x.
void lrn_forward(Context& ctx, const LrnParams& lrn, double alpha, const TensorDesc& x, double beta,
                 const TensorDesc& y);
void lrn_backward(Context& ctx, const LrnParams& lrn, double alpha, const TensorDesc& y,
                  const TensorDesc& dy, const TensorDesc& x, double beta, const TensorDesc& dx);

// ---- divisive normalization (means optional: null is zero) and local contrast normalization
// on [N, C, H, W] (kernels/lcn/lcn.h). dmeans (optional) is blended with the same alpha, beta.
void divisive_normalization_forward(Context& ctx, const LcnParams& lcn, double alpha,
                                    const TensorDesc& x, const TensorDesc* means, double beta,
                                    const TensorDesc& y);
void divisive_normalization_backward(Context& ctx, const LcnParams& lcn, double alpha,
                                     const TensorDesc& x, const TensorDesc* means,
                                     const TensorDesc& dy, double beta, const TensorDesc& dx,
                                     const TensorDesc* dmeans);
void lcn_forward(Context& ctx, const LcnParams& lcn, double alpha, const TensorDesc& x, double beta,
                 const TensorDesc& y);
void lcn_backward(Context& ctx, const LcnParams& lcn, double alpha, const TensorDesc& x,
                  const TensorDesc& dy, double beta, const TensorDesc& dx);

// ---- batch normalization (kernels/batch_norm/batch_norm.h) on x [N, C, ...]: spatial (per
// channel; parameters [C] or [1, C, 1, ...]) or per activation (parameters x's dims without N,
// or with N = 1). x, y, dy, dx may be strided; the parameters and statistics are packed (the
// running ones are updated in place). running_mean / running_var may be null (not tracked).
// momentum is cuDNN's exponentialAverageFactor.
enum class BatchNormMode { spatial, per_activation };
void batch_norm_forward_training(Context& ctx, BatchNormMode mode, double alpha, double beta,
                                 const TensorDesc& x, const TensorDesc& y, const TensorDesc& gamma,
                                 const TensorDesc& bias, double momentum,
                                 const TensorDesc* running_mean, const TensorDesc* running_var,
                                 double eps, const TensorDesc& save_mean,
                                 const TensorDesc& save_invstd);
void batch_norm_forward_inference(Context& ctx, BatchNormMode mode, double alpha, double beta,
                                  const TensorDesc& x, const TensorDesc& y, const TensorDesc& gamma,
                                  const TensorDesc& bias, const TensorDesc& running_mean,
                                  const TensorDesc& running_var, double eps);
// dx = alpha_data * dx' + beta_data * dx; dgamma, dbias = alpha_param * ... + beta_param * ...
// (cuDNN's four factors), through the saved batch statistics of the training forward.
void batch_norm_backward(Context& ctx, BatchNormMode mode, double alpha_data, double beta_data,
                         double alpha_param, double beta_param, const TensorDesc& x,
                         const TensorDesc& dy, const TensorDesc& dx, const TensorDesc& gamma,
                         const TensorDesc& dgamma, const TensorDesc& dbias,
                         const TensorDesc& save_mean, const TensorDesc& save_invstd);

// ---- dropout (kernels/dropout/dropout.h): the mask is a function of (seed, step, element's
// row-major index), so a strided x drops the same elements as its contiguous copy. The state
// holds the step counter; each forward advances it, the backward reuses the last forward's mask.
struct DropoutState {
  float ratio = 0.5f;
  uint64_t seed = 1;
  Tensor step;  // kernels::dropout_step_counter(ctx)
  static DropoutState create(Context& ctx, float ratio, uint64_t seed);
};
void dropout_forward(Context& ctx, DropoutState& state, double alpha, const TensorDesc& x,
                     double beta, const TensorDesc& y);
void dropout_backward(Context& ctx, const DropoutState& state, double alpha, const TensorDesc& dy,
                      double beta, const TensorDesc& dx);

// ---- tensor operations (kernels/tensor_ops/tensor_ops.h has the definitions)
void op_tensor(Context& ctx, OpTensorOp op, double alpha1, const TensorDesc& a, double alpha2,
               const TensorDesc* b, double beta, const TensorDesc& c);
// y = alpha * b + beta * y, b broadcast along its extent-1 dims (cudnnAddTensor: a bias).
void add_tensor(Context& ctx, double alpha, const TensorDesc& b, double beta, const TensorDesc& y);
void reduce_tensor(Context& ctx, ReduceOp op, double alpha, const TensorDesc& x, double beta,
                   const TensorDesc& y, const TensorDesc* indices = nullptr);
// y = alpha * x + beta * y, x and y of one dims, any strides each (an NCHW <-> NHWC change is
// x and y descriptors with the two stride orders).
void transform_tensor(Context& ctx, double alpha, const TensorDesc& x, double beta,
                      const TensorDesc& y);
void set_tensor(Context& ctx, const TensorDesc& y, double value);
void scale_tensor(Context& ctx, const TensorDesc& y, double alpha);

// ---- GEMM: c = alpha * op(a) op(b) + beta * c on 2-D descriptors (a [M, K],
// or [K, M] when trans_a; likewise b). A column-major a or b (a transposed view) is read in place
// by flipping its transpose flag; other strides are gathered.
void gemm(Context& ctx, bool trans_a, bool trans_b, double alpha, const TensorDesc& a,
          const TensorDesc& b, double beta, const TensorDesc& c,
          cuda::GemmMath math = cuda::GemmMath::fp32);

}  // namespace crema::kernels::api
