// Synchronized batch normalization, CUDA (sync_batch_norm.h). x is [N, C, S]; channel c has
// M = N*S values, value k of it (k = n*S + i) at (n*C + c)*S + i.
//
// The two sums kernels give one block to each channel: its threads walk the channel's values in
// a fixed order and the block adds their partials in a fixed tree (reduce_cuda.cuh), so the sums
// have the same bits on every run. C blocks fill an H100's 132 SMs only from C = 132 up (a
// ResNet's first stages have 64): batch_norm_cuda.cu's split_channel would be the next version
// if SyncBatchNorm's share of a step asks for it. statistics is one thread per channel, the
// backward one thread per value.
#include "core/cuda_runtime.h"
#include "kernels/batch_norm/sync_batch_norm.h"
#include "kernels/common/launch.h"
#include "kernels/common/reduce_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::block_sum;
using detail::kReduceThreads;
using detail::Partial;

__device__ int64_t offset(const BatchNormShape& s, int64_t c, int64_t k) {
  const int64_t n = k / s.S, i = k - n * s.S;
  return (n * s.C + c) * s.S + i;
}

// sums[c] = sum first(j), sums[C + c] = sum second(j) over channel c's values; sums[2C] = M.
template <class Terms>
__global__ void channel_sums(BatchNormShape s, Terms terms, double* sums) {
  const int64_t c = blockIdx.x, M = s.N * s.S;
  Partial a{0.0, 0}, b{0.0, 0};
  for (int64_t k = threadIdx.x; k < M; k += kReduceThreads) {
    const int64_t j = offset(s, c, k);
    a.value += terms.first(c, j);
    b.value += terms.second(c, j);
  }
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x != 0) return;
  sums[c] = a.value;
  sums[s.C + c] = b.value;
  if (c == 0) sums[2 * s.C] = double(M);
}

struct XTerms {  // x and x^2
  const float* x;
  __device__ double first(int64_t, int64_t j) const { return double(x[j]); }
  __device__ double second(int64_t, int64_t j) const { return double(x[j]) * double(x[j]); }
};

struct GradientTerms {  // dy and dy * xhat
  const float *x, *dy, *mean, *invstd;
  __device__ double first(int64_t, int64_t j) const { return double(dy[j]); }
  __device__ double second(int64_t c, int64_t j) const {
    return double(dy[j]) * ((double(x[j]) - double(mean[c])) * double(invstd[c]));
  }
};

__global__ void statistics(int64_t C, const double* sums, float momentum, float* mean, float* var,
                           float* running_mean, float* running_var, float* num_batches_tracked) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c == 0 && num_batches_tracked) *num_batches_tracked += 1.0f;
  if (c >= C) return;
  const double M = sums[2 * C];
  const double m = sums[c] / M;
  const double squares = fmax(0.0, sums[C + c] - sums[c] * m);
  mean[c] = float(m);
  var[c] = float(squares / M);
  if (running_mean) running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * float(m);
  if (running_var) {
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * float(squares / (M - 1.0));
  }
}

// The parameter gradients (one thread per channel) and dx (one thread per value).
__global__ void parameter_gradients(int64_t C, const double* local, float* dgamma, float* dbeta) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  if (dbeta) dbeta[c] += float(local[c]);
  if (dgamma) dgamma[c] += float(local[C + c]);
}

__global__ void input_gradient(BatchNormShape s, const float* x, const float* dy,
                               const float* gamma, const float* mean, const float* invstd,
                               const double* global, float* dx) {
  const int64_t count = s.N * s.C * s.S;
  const double M = global[2 * s.C];
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (j / s.S) % s.C;
    const double k = (gamma ? double(gamma[c]) : 1.0) * double(invstd[c]);
    const double xhat = (double(x[j]) - double(mean[c])) * double(invstd[c]);
    dx[j] = float(k * (double(dy[j]) - global[c] / M - xhat * (global[s.C + c] / M)));
  }
}

}  // namespace

void batch_norm_channel_sums(const BatchNormShape& s, const float* x, double* sums,
                             gpu::Stream stream) {
  if (s.C == 0) return;
  channel_sums<<<unsigned(s.C), kReduceThreads, 0, stream>>>(s, XTerms{x}, sums);
  gpu::check_launch("batch_norm_channel_sums");
}

void batch_norm_gradient_sums(const BatchNormShape& s, const float* x, const float* dy,
                              const float* mean, const float* invstd, double* sums,
                              gpu::Stream stream) {
  if (s.C == 0) return;
  channel_sums<<<unsigned(s.C), kReduceThreads, 0, stream>>>(s, GradientTerms{x, dy, mean, invstd},
                                                             sums);
  gpu::check_launch("batch_norm_gradient_sums");
}

void batch_norm_statistics(int64_t C, const double* sums, float momentum, float* mean, float* var,
                           float* running_mean, float* running_var, float* num_batches_tracked,
                           gpu::Stream stream) {
  statistics<<<blocks_for(C), kThreads, 0, stream>>>(C, sums, momentum, mean, var, running_mean,
                                                     running_var, num_batches_tracked);
  gpu::check_launch("batch_norm_statistics");
}

void sync_batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                              const float* gamma, const float* mean, const float* invstd,
                              const double* local, const double* global, float* dx, float* dgamma,
                              float* dbeta, gpu::Stream stream) {
  if (dgamma || dbeta) {
    parameter_gradients<<<blocks_for(s.C), kThreads, 0, stream>>>(s.C, local, dgamma, dbeta);
    gpu::check_launch("sync_batch_norm_backward (parameters)");
  }
  const int64_t count = s.N * s.C * s.S;
  if (!dx || count == 0) return;
  input_gradient<<<blocks_for(count), kThreads, 0, stream>>>(s, x, dy, gamma, mean, invstd, global,
                                                             dx);
  gpu::check_launch("sync_batch_norm_backward (input)");
}

}  // namespace crema::kernels::cuda
