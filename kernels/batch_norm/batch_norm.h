// Batch normalization (Ioffe & Szegedy 2015) over the channel axis, PyTorch's semantics.
//
// x is viewed as [N, C, S]: N the batch, C the channels (axis 1), S the product of the axes after
// it (H*W for images, 1 for [N, C] features). Each channel has M = N*S values.
//
// Training (batch statistics), per channel c:
//   mean[c]   = 1/M sum_{n,s} x[n,c,s]
//   var[c]    = 1/M sum_{n,s} (x[n,c,s] - mean[c])^2           biased: it normalizes
//   invstd[c] = 1 / sqrt(var[c] + eps)
//   y[n,c,s]  = gamma[c] * (x[n,c,s] - mean[c]) * invstd[c] + beta[c]
//   running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean[c]
//   running_var[c]  = (1 - momentum) * running_var[c]  + momentum * var[c] * M / (M - 1)
//                                                               unbiased (M > 1 required)
//   num_batches_tracked += 1
// Inference (the running statistics): mean = running_mean, invstd = 1 / sqrt(running_var + eps),
// the same y, nothing updated.
// Both forwards save mean[c] and invstd[c] (save_mean, save_invstd) for the backward.
//
// Backward, with xhat = (x - mean) * invstd and the sums over (n, s) of channel c:
//   dbeta[c]  += sum dy
//   dgamma[c] += sum dy * xhat
//   through the batch statistics (training):
//     dx = gamma * invstd * (dy - (sum dy) / M - xhat * (sum dy * xhat) / M)
//   with fixed statistics (inference, or Caffe's use_global_stats):
//     dx = gamma * invstd * dy
//
// Without affine parameters gamma and beta are absent (gamma = 1, beta = 0); dgamma and dbeta
// may be absent (frozen or no affine), and dx (no gradient wanted for x). Absent means a null
// pointer at the raw level and an undefined Tensor at the Tensor level.
// y may alias x and dx may alias dy: every kernel reads all of a channel's inputs before it
// writes any of its outputs. The sums are deterministic: fixed order on the CPU (one thread per
// channel), fixed partials and trees on the GPU (no atomics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace crema::kernels {

struct BatchNormShape {
  int64_t N = 0, C = 0, S = 1;  // x is [N, C, S]
};

// The view of an x of shape [N, C, ...] (at least 2 axes): S is the product of the axes after C.
inline BatchNormShape batch_norm_shape(const Shape& x_shape) {
  return {x_shape[0], x_shape[1], shape_count(x_shape, 2, int(x_shape.size()))};
}

namespace ref {
// Plain loops, sums in double; the oracle of the tests. Explicitly instantiated for float and
// double. running_mean/running_var/num_batches_tracked may be null (not tracked).
template <class T>
void batch_norm_forward_training(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                                 T eps, T momentum, T* y, T* save_mean, T* save_invstd,
                                 T* running_mean, T* running_var, T* num_batches_tracked);
template <class T>
void batch_norm_forward_inference(const BatchNormShape& s, const T* x, const T* gamma,
                                  const T* beta, const T* running_mean, const T* running_var, T eps,
                                  T* y, T* save_mean, T* save_invstd);
// batch_stats: the training gradient (through mean and var) or the fixed-statistics one.
template <class T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, bool batch_stats, T* dx,
                         T* dgamma, T* dbeta);
}  // namespace ref

namespace cpu {
// The same: channels split over up to `num_threads` OpenMP threads, each channel's sums in double
// in a fixed order (the result does not depend on the thread count), inner loops vectorized.
void batch_norm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                 const float* beta, float eps, float momentum, float* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, int num_threads);
void batch_norm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd, int num_threads);
void batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd,
                         bool batch_stats, float* dx, float* dgamma, float* dbeta, int num_threads);
}  // namespace cpu

namespace cuda {
// block_per_channel: one block per channel walks the channel's M values (sums, then outputs).
// split_channel: each channel split into chunks of a few thousand values; a first kernel writes
//   per-chunk partial sums, a second combines them in a fixed order (each block for its own
//   channel) and writes the outputs: C * chunks blocks, enough to fill the GPU when C is small.
// split_rows: for S == 1 only (an nhwc x viewed as [N*H*W, C, 1], or [N, C] features), where a
//   channel's values are C apart: blocks of 32 channels x a chunk of rows read whole rows
//   (coalesced) into per-chunk partial sums, one warp per channel adds them in a fixed order,
//   and an elementwise kernel writes the outputs.
// split_rows_vec: split_rows with 16-byte loads and stores (8 bf16 / f16 or 4 f32 channels a
//   thread) where C allows and the pointers are aligned, split_rows otherwise.
// rows_tiled: split_rows_vec with each thread on a fixed group of channels (blocks are tiles of
//   whole rows), their parameters in registers, and a shared-memory tree for kernel 1's column
//   sums; split_rows_vec where the 16-byte form does not apply.
// Inference forward: one elementwise kernel (the same in every version; rows_tiled's where S == 1
// and the 16-byte form applies). See README.md.
enum class BatchNormVersion {
  block_per_channel,
  split_channel,
  split_rows,
  split_rows_vec,
  rows_tiled,
  best = split_channel
};

// The version production runs for x viewed as `s`: rows_tiled where S == 1, best otherwise.
inline BatchNormVersion batch_norm_version_for(const BatchNormShape& s) {
  return s.S == 1 ? BatchNormVersion::rows_tiled : BatchNormVersion::best;
}

// The versions that run x viewed as [M, C, 1] (S == 1: nhwc, [N, C]), oldest first; with
// split_channel these are what the fused forms take.
inline std::vector<BatchNormVersion> batch_norm_row_versions() {
  return {BatchNormVersion::split_rows, BatchNormVersion::split_rows_vec,
          BatchNormVersion::rows_tiled};
}

inline const char* batch_norm_version_name(BatchNormVersion version) {
  switch (version) {
    case BatchNormVersion::block_per_channel:
      return "block_per_channel";
    case BatchNormVersion::split_channel:
      return "split_channel";
    case BatchNormVersion::split_rows:
      return "split_rows";
    case BatchNormVersion::split_rows_vec:
      return "split_rows_vec";
    case BatchNormVersion::rows_tiled:
      return "rows_tiled";
  }
  return "?";
}

// Throws crema::Error when `version` cannot run x viewed as `s` (a row version with S > 1).
void check_version_fits(const BatchNormShape& s, BatchNormVersion version);
// Device scratch the training forward and the backward need (partial sums).
size_t batch_norm_workspace_bytes(const BatchNormShape& s, BatchNormVersion version);
// T, the storage type of x, y, dy and dx: float, bf16_t or f16_t (widened to float on load,
// each output rounded once); parameters and statistics are float, sums double.
template <class T>
void batch_norm_forward_training(const BatchNormShape& s, const T* x, const float* gamma,
                                 const float* beta, float eps, float momentum, T* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, void* workspace,
                                 BatchNormVersion version, gpu::Stream stream);
template <class T>
void batch_norm_forward_inference(const BatchNormShape& s, const T* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, T* y, float* save_mean,
                                  float* save_invstd, gpu::Stream stream);
template <class T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, bool batch_stats, T* dx,
                         float* dgamma, float* dbeta, void* workspace, BatchNormVersion version,
                         gpu::Stream stream);
}  // namespace cuda

// Tensor level. x, y, dy, dx: [N, C, ...] (at least 2 axes) of one shape, dtype and layout;
// gamma, beta, dgamma, dbeta, save_mean, save_invstd, running_mean, running_var: [C];
// num_batches_tracked: one element. On the context's device: x f32 (CPU, CUDA), bf16 or f16
// (CUDA) with float32 parameters and statistics (mixed precision keeps them fp32), or all f64
// (the CPU, which runs ref::). A 4-D x in nhwc is normalized as the [N*H*W, C, 1] view of its
// memory (rows of C channels; cpu:: walks rows, CUDA runs rows_tiled), in either layout by every
// implementation. Optional ones may be undefined Tensors (see above). Throws crema::Error naming
// the op and the tensor when they do not fit, for eps < 0 or a momentum outside [0, 1], and in
// training when a channel has a single value (M = 1: no unbiased variance).
void batch_norm_forward_training(Context& ctx, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, float eps, float momentum, Tensor& y,
                                 Tensor& save_mean, Tensor& save_invstd, Tensor& running_mean,
                                 Tensor& running_var, Tensor& num_batches_tracked);
void batch_norm_forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean,
                                  const Tensor& running_var, float eps, Tensor& y,
                                  Tensor& save_mean, Tensor& save_invstd);
void batch_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& save_mean, const Tensor& save_invstd, bool batch_stats,
                         Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// Per-activation batch normalization (cuDNN's CUDNN_BATCHNORM_PER_ACTIVATION): every element of
// x's axes after N has its own statistics, over the batch only (M = N), with the formulas above
// for "channel" = one activation (c, s). gamma, beta, dgamma, dbeta, the saved and the running
// statistics have x's shape without its first axis ([C, H, W] for NCHW x). It is the channel batch
// norm on x viewed as [N, C*S] (batch_norm_per_activation.cpp), so it runs the same kernels;
// training needs N >= 2. x must be nchw (a 4-D nhwc x is refused); on CUDA the [N, C*S] view runs
// rows_tiled, threads along C*S.
void batch_norm_per_activation_forward_training(Context& ctx, const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, float eps, float momentum,
                                                Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                                                Tensor& running_mean, Tensor& running_var,
                                                Tensor& num_batches_tracked);
void batch_norm_per_activation_forward_inference(Context& ctx, const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, const Tensor& running_mean,
                                                 const Tensor& running_var, float eps, Tensor& y,
                                                 Tensor& save_mean, Tensor& save_invstd);
void batch_norm_per_activation_backward(Context& ctx, const Tensor& x, const Tensor& dy,
                                        const Tensor& gamma, const Tensor& save_mean,
                                        const Tensor& save_invstd, bool batch_stats, Tensor& dx,
                                        Tensor& dgamma, Tensor& dbeta);

}  // namespace crema::kernels
