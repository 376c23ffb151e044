// Synchronized batch normalization (PyTorch's nn.SyncBatchNorm): training on several processes,
// each with its part of the batch, the statistics are those of the whole batch. A layer runs these
// kernels around an all-reduce (a sum over the ranks) of their small per-channel outputs:
//
//   forward:   local  = channel_sums(x)                 [sum x, sum x^2, M] per rank, in double
//              global = all-reduce(local)
//              mean, var = statistics(global)           (and the running statistics move)
//              y = batch_norm_forward_inference(x, mean, var)        (batch_norm.h; saves
//                                                         mean and invstd for the backward)
//   backward:  local  = gradient_sums(x, dy)            [sum dy, sum dy * xhat, M]
//              global = all-reduce(local)
//              dx, dgamma, dbeta = sync_batch_norm_backward(local, global)
//
// x is viewed as [N, C, S] as in batch_norm.h; M is the number of values of a channel, summed over
// the ranks in `global`. With sums over every rank's values of channel c ("global"):
//   mean[c] = Sx / M,  var[c] = (Sxx - Sx * mean) / M  (biased: it normalizes), clamped at 0
//   running_mean = (1 - momentum) * running_mean + momentum * mean
//   running_var  = (1 - momentum) * running_var  + momentum * var * M / (M - 1)
//   num_batches_tracked += 1
// The sums of x and x^2 are kept in double: var = E[x^2] - mean^2 loses to cancellation what
// float32 would lose, and sum x^2 in double keeps about 1e-16 * mean^2 / var of relative error.
//
// Backward: each rank's loss is its own samples' (the data-parallel solver averages the ranks'
// parameter gradients), and the normalization couples every rank's x, so, with the global sums
// Sdy = sum dy and Sdyx = sum dy * xhat over every rank,
//   dx     = gamma * invstd * (dy - Sdy / M - xhat * Sdyx / M)     (batch_norm.h's, global sums)
//   dgamma += local sum dy * xhat,  dbeta += local sum dy            (this rank's loss only)
// which is PyTorch's: two ranks with half the batch each give the whole batch's dx, and their
// dgamma, dbeta add up to the whole batch's.
//
// sums: f64 [2 * C + 1] = [first sum per channel, second sum per channel, M], on x's device.
// Deterministic: fixed order on the CPU, fixed trees on the GPU (no atomics).
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/batch_norm/batch_norm.h"

namespace crema::kernels {

namespace ref {
// Plain loops, one channel at a time, sums in double; float (the CPU's path) and double.
template <class T>
void batch_norm_channel_sums(const BatchNormShape& s, const T* x, double* sums);
template <class T>
void batch_norm_gradient_sums(const BatchNormShape& s, const T* x, const T* dy, const T* mean,
                              const T* invstd, double* sums);
template <class T>
void batch_norm_statistics(int64_t C, const double* sums, T momentum, T* mean, T* var,
                           T* running_mean, T* running_var, T* num_batches_tracked);
template <class T>
void sync_batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma,
                              const T* mean, const T* invstd, const double* local,
                              const double* global, T* dx, T* dgamma, T* dbeta);
}  // namespace ref

namespace cuda {
// One block per channel walks the channel's values (a fixed tree: reduce_cuda.cuh); statistics
// one thread per channel; the backward one thread per value. float32 x.
void batch_norm_channel_sums(const BatchNormShape& s, const float* x, double* sums,
                             gpu::Stream stream);
void batch_norm_gradient_sums(const BatchNormShape& s, const float* x, const float* dy,
                              const float* mean, const float* invstd, double* sums,
                              gpu::Stream stream);
void batch_norm_statistics(int64_t C, const double* sums, float momentum, float* mean, float* var,
                           float* running_mean, float* running_var, float* num_batches_tracked,
                           gpu::Stream stream);
void sync_batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                              const float* gamma, const float* mean, const float* invstd,
                              const double* local, const double* global, float* dx, float* dgamma,
                              float* dbeta, gpu::Stream stream);
}  // namespace cuda

// Tensor level. x, dy, dx: [N, C, ...] (at least 2 axes), float32 (or float64 on the CPU);
// mean, var, invstd, gamma, dgamma, dbeta and the running statistics: [C] of x's dtype;
// num_batches_tracked: one element; sums, local, global: f64 [2 * C + 1]. gamma, dx, dgamma, dbeta
// and the running statistics may be undefined (absent). Throws crema::Error naming the op and the
// tensor when they do not fit, and for a momentum outside [0, 1].
void batch_norm_channel_sums(Context& ctx, const Tensor& x, Tensor& sums);
void batch_norm_gradient_sums(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& mean,
                              const Tensor& invstd, Tensor& sums);
// From the global sums: the batch's mean and biased var, the running statistics updated (the
// caller makes sure that M > 1: every rank has at least 2 values per channel).
void batch_norm_statistics(Context& ctx, const Tensor& sums, float momentum, Tensor& mean,
                           Tensor& var, Tensor& running_mean, Tensor& running_var,
                           Tensor& num_batches_tracked);
void sync_batch_norm_backward(Context& ctx, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& mean, const Tensor& invstd, const Tensor& local,
                              const Tensor& global, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

}  // namespace crema::kernels
