// Batch normalization, CUDA versions. x is [N, C, S]; channel c has M = N*S values, value k of it
// (k = n*S + i) at (n*C + c)*S + i. Sums are accumulated in double and reduced in fixed trees
// (no atomics): the same bits on every run.
//
//   BatchNormVersion::block_per_channel  one block per channel does everything in place: the
//       forward sums the channel (mean), sums its squared deviations (var), thread 0 saves the
//       statistics and updates the running ones, then the block writes y; the backward sums dy
//       and dy*(x - mean), then writes dx. C blocks: a GPU of 132 SMs idles when C is 16.
//   BatchNormVersion::split_channel  (best) each channel is cut into chunks of kChunk values, a
//       grid of C x chunks blocks. Kernel 1 writes each chunk's partial sums (forward: sum x and
//       sum x^2; backward: sum dy and sum dy*(x - mean)); kernel 2, on the same grid, has warp 0
//       of every block add its channel's partials in chunk order (the same bits in every block),
//       the chunk-0 block of each channel store the statistics, running statistics and parameter
//       gradients, and every block write its chunk's outputs. Two launches, enough blocks to
//       fill the GPU at LeNet's and VGG's sizes.
// The inference forward is one elementwise kernel, used by both versions.
//
// Variance from sum x and sum x^2 (split_channel): var = E[x^2] - mean^2 in double loses about
// (mean / std)^2 * 1e-16 relative, negligible for activations (block_per_channel and the CPU
// subtract the mean first). A channel may have at most 2^31 - 1 values (the dispatch checks).
#include <cmath>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/launch.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Values per chunk of split_channel (8 per thread), and the most chunks a channel is cut into
// (beyond, chunks grow): warp 0 of kernel 2 adds at most this many partials.
constexpr int64_t kChunk = 2048;
constexpr int64_t kMaxChunks = 1024;

struct Sums {
  double a, b;
};

__device__ inline Sums warp_sum(Sums v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v.a += __shfl_xor_sync(kFullMask, v.a, offset);
    v.b += __shfl_xor_sync(kFullMask, v.b, offset);
  }
  return v;
}

// The block's total, in every thread, added in a fixed tree. Every thread must call it.
__device__ Sums block_sum(Sums v) {
  __shared__ Sums warp_sums[kWarps];
  __shared__ Sums total;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    Sums w = lane < kWarps ? warp_sums[lane] : Sums{0.0, 0.0};
    w = warp_sum(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  const Sums result = total;
  __syncthreads();  // the arrays may be reused by a next call
  return result;
}

// Element offset of value k of channel c.
struct Channel {
  int64_t C, S;
  __device__ int64_t offset(int64_t c, unsigned k) const {
    const unsigned n = k / unsigned(S), i = k - n * unsigned(S);
    return (int64_t(n) * C + c) * S + i;
  }
};

// Values [k0, k1) of the channel handled by this block.
struct Range {
  unsigned k0, k1;
};

__device__ inline Range chunk_range(int64_t M, int64_t chunk) {
  const int64_t k0 = int64_t(blockIdx.y) * chunk;
  const int64_t k1 = k0 + chunk < M ? k0 + chunk : M;
  return {unsigned(k0), unsigned(k1)};
}

// Statistics of channel c, stored where the kernel that computed them says so.
struct TrainingOutputs {
  float eps, momentum;
  float *save_mean, *save_invstd, *running_mean, *running_var, *num_batches_tracked;
  // Called once per channel by one thread; returns {mean, invstd} as floats.
  __device__ void store(int64_t c, double M, double mean, double var) const {
    const float invstd = float(1.0 / sqrt(var + double(eps)));
    save_mean[c] = float(mean);
    save_invstd[c] = invstd;
    if (running_mean) {
      running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * float(mean);
    }
    if (running_var) {
      running_var[c] = (1.0f - momentum) * running_var[c] + momentum * float(var * M / (M - 1.0));
    }
    if (c == 0 && num_batches_tracked) *num_batches_tracked += 1.0f;
  }
};

// The backward's per-channel coefficients: dx = a * (dy - b - (x - mean) * d).
struct BackwardOutputs {
  bool batch_stats;
  const float *gamma, *save_mean, *save_invstd;
  float *dgamma, *dbeta;
  // Once per channel: accumulates the parameter gradients (when `owner`) and returns {a, b, d}.
  __device__ float3 finish(int64_t c, double M, double sum_dy, double sum_dy_xmu,
                           bool owner) const {
    const double invstd = double(save_invstd[c]);
    if (owner && dgamma) dgamma[c] += float(invstd * sum_dy_xmu);
    if (owner && dbeta) dbeta[c] += float(sum_dy);
    const float a = float((gamma ? double(gamma[c]) : 1.0) * invstd);
    if (!batch_stats) return make_float3(a, 0.0f, 0.0f);
    return make_float3(a, float(sum_dy / M), float(invstd * invstd * sum_dy_xmu / M));
  }
};

// --- v1: block_per_channel, grid (C) ---

__global__ void forward_training_per_channel(BatchNormShape s, const float* x, const float* gamma,
                                             const float* beta, TrainingOutputs out, float* y) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  double sum = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) sum += double(x[ch.offset(c, k)]);
  const double mean = block_sum({sum, 0.0}).a / double(M);
  double squares = 0.0;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const double d = double(x[ch.offset(c, k)]) - mean;
    squares += d * d;
  }
  const double var = block_sum({squares, 0.0}).a / double(M);
  // Every thread reads x before thread 0 writes anything and before any y is written (y may
  // alias x): block_sum ends with a barrier.
  if (threadIdx.x == 0) out.store(c, double(M), mean, var);
  const float m = float(mean), invstd = float(1.0 / sqrt(var + double(out.eps)));
  const float scale = (gamma ? gamma[c] : 1.0f) * invstd, shift = beta ? beta[c] : 0.0f;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    y[j] = (x[j] - m) * scale + shift;
  }
}

__global__ void backward_per_channel(BatchNormShape s, const float* x, const float* dy,
                                     BackwardOutputs out, float* dx) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const unsigned M = unsigned(s.N * s.S);
  const float mean = out.save_mean[c];
  Sums sums{0.0, 0.0};
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    sums.a += double(dy[j]);
    sums.b += double(dy[j]) * double(x[j] - mean);
  }
  sums = block_sum(sums);
  const float3 coef = out.finish(c, double(M), sums.a, sums.b, threadIdx.x == 0);
  if (!dx) return;
  for (unsigned k = threadIdx.x; k < M; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    dx[j] = coef.x * (dy[j] - coef.y - (x[j] - mean) * coef.z);
  }
}

// --- v2: split_channel, grid (C, chunks); partials[c * chunks + chunk] ---

__global__ void partial_moments(BatchNormShape s, int64_t chunk, const float* x, Sums* partials) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  Sums sums{0.0, 0.0};
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const double v = double(x[ch.offset(c, k)]);
    sums.a += v;
    sums.b += v * v;
  }
  sums = block_sum(sums);
  if (threadIdx.x == 0) partials[c * gridDim.y + blockIdx.y] = sums;
}

__global__ void partial_grad_sums(BatchNormShape s, int64_t chunk, const float* x, const float* dy,
                                  const float* save_mean, Sums* partials) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  const float mean = save_mean[c];
  Sums sums{0.0, 0.0};
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    sums.a += double(dy[j]);
    sums.b += double(dy[j]) * double(x[j] - mean);
  }
  sums = block_sum(sums);
  if (threadIdx.x == 0) partials[c * gridDim.y + blockIdx.y] = sums;
}

// Channel c's partials added by warp 0 in a fixed order (lane-strided, then a butterfly); valid
// in warp 0 only.
__device__ inline Sums channel_total(const Sums* partials, int64_t c, int chunks) {
  const int lane = int(threadIdx.x) % 32;
  Sums v{0.0, 0.0};
  for (int j = lane; j < chunks; j += 32) {
    v.a += partials[c * chunks + j].a;
    v.b += partials[c * chunks + j].b;
  }
  return warp_sum(v);
}

__global__ void normalize_training(BatchNormShape s, int64_t chunk, const float* x,
                                   const float* gamma, const float* beta, const Sums* partials,
                                   TrainingOutputs out, float* y) {
  const int64_t c = blockIdx.x;
  const double M = double(s.N * s.S);
  __shared__ float mean, scale;
  if (threadIdx.x < 32) {
    const Sums total = channel_total(partials, c, int(gridDim.y));
    if (threadIdx.x == 0) {
      const double m = total.a / M;
      const double var = fmax(total.b / M - m * m, 0.0);
      if (blockIdx.y == 0) out.store(c, M, m, var);
      mean = float(m);
      scale = (gamma ? gamma[c] : 1.0f) * float(1.0 / sqrt(var + double(out.eps)));
    }
  }
  __syncthreads();
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  const float m = mean, sc = scale, shift = beta ? beta[c] : 0.0f;
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    y[j] = (x[j] - m) * sc + shift;
  }
}

// `have_sums`: partials hold sum dy and sum dy*(x - mean); without them (fixed statistics and
// no parameter gradients) only dx = gamma * invstd * dy is written.
__global__ void backward_apply(BatchNormShape s, int64_t chunk, const float* x, const float* dy,
                               const Sums* partials, int chunks, bool have_sums,
                               BackwardOutputs out, float* dx) {
  const int64_t c = blockIdx.x;
  __shared__ float3 coef;
  if (threadIdx.x < 32) {
    const Sums total = have_sums ? channel_total(partials, c, chunks) : Sums{0.0, 0.0};
    if (threadIdx.x == 0) {
      coef = out.finish(c, double(s.N * s.S), total.a, total.b, blockIdx.y == 0);
    }
  }
  __syncthreads();
  if (!dx) return;
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  const float3 k3 = coef;
  const float mean = out.save_mean[c];
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    dx[j] = k3.x * (dy[j] - k3.y - (x[j] - mean) * k3.z);
  }
}

// --- inference forward: elementwise, either version ---

template <class Index>
__global__ void normalize_inference(Index total, Index C, Index S, const float* x,
                                    const float* gamma, const float* beta,
                                    const float* running_mean, const float* running_var, float eps,
                                    float* y, float* save_mean, float* save_invstd) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    const Index c = (e / S) % C;
    const float invstd = 1.0f / sqrtf(running_var[c] + eps);
    if (e < C) {
      save_mean[e] = running_mean[e];
      save_invstd[e] = 1.0f / sqrtf(running_var[e] + eps);
    }
    const float scale = (gamma ? gamma[c] : 1.0f) * invstd;
    y[e] = (x[e] - running_mean[c]) * scale + (beta ? beta[c] : 0.0f);
  }
}

// Values per chunk for a channel of M values: kChunk, or more when that would give more than
// kMaxChunks chunks.
int64_t chunk_length(int64_t M) {
  const int64_t by_limit = (M + kMaxChunks - 1) / kMaxChunks;
  return by_limit > kChunk ? by_limit : kChunk;
}

int chunk_count(int64_t M) {
  const int64_t chunk = chunk_length(M);
  const int64_t chunks = (M + chunk - 1) / chunk;
  return int(chunks < 1 ? 1 : chunks);
}

}  // namespace

size_t batch_norm_workspace_bytes(const BatchNormShape& s, BatchNormVersion version) {
  if (version == BatchNormVersion::block_per_channel) return 0;
  return size_t(s.C) * size_t(chunk_count(s.N * s.S)) * sizeof(Sums);
}

void batch_norm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                 const float* beta, float eps, float momentum, float* y,
                                 float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var, float* num_batches_tracked, void* workspace,
                                 BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  const TrainingOutputs out{eps,          momentum,    save_mean,          save_invstd,
                            running_mean, running_var, num_batches_tracked};
  if (version == BatchNormVersion::block_per_channel) {
    forward_training_per_channel<<<unsigned(s.C), kThreads, 0, stream>>>(s, x, gamma, beta, out, y);
    gpu::check_launch("batch_norm_forward_training (block_per_channel)");
    return;
  }
  const int64_t M = s.N * s.S, chunk = chunk_length(M);
  const dim3 grid(unsigned(s.C), unsigned(chunk_count(M)));
  Sums* partials = static_cast<Sums*>(workspace);
  partial_moments<<<grid, kThreads, 0, stream>>>(s, chunk, x, partials);
  gpu::check_launch("batch_norm_forward_training (partial_moments)");
  normalize_training<<<grid, kThreads, 0, stream>>>(s, chunk, x, gamma, beta, partials, out, y);
  gpu::check_launch("batch_norm_forward_training (normalize_training)");
}

void batch_norm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, float eps, float* y, float* save_mean,
                                  float* save_invstd, gpu::Stream stream) {
  const int64_t total = s.N * s.C * s.S;
  if (total == 0) return;
  const int blocks = blocks_for(total, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    normalize_inference<unsigned><<<blocks, kThreads, 0, stream>>>(
        unsigned(total), unsigned(s.C), unsigned(s.S), x, gamma, beta, running_mean, running_var,
        eps, y, save_mean, save_invstd);
  } else {
    normalize_inference<int64_t><<<blocks, kThreads, 0, stream>>>(
        total, s.C, s.S, x, gamma, beta, running_mean, running_var, eps, y, save_mean, save_invstd);
  }
  gpu::check_launch("batch_norm_forward_inference");
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd,
                         bool batch_stats, float* dx, float* dgamma, float* dbeta, void* workspace,
                         BatchNormVersion version, gpu::Stream stream) {
  if (s.C == 0) return;
  const BackwardOutputs out{batch_stats, gamma, save_mean, save_invstd, dgamma, dbeta};
  if (version == BatchNormVersion::block_per_channel) {
    backward_per_channel<<<unsigned(s.C), kThreads, 0, stream>>>(s, x, dy, out, dx);
    gpu::check_launch("batch_norm_backward (block_per_channel)");
    return;
  }
  const int64_t M = s.N * s.S, chunk = chunk_length(M);
  const int chunks = chunk_count(M);
  const bool have_sums = batch_stats || dgamma || dbeta;
  Sums* partials = static_cast<Sums*>(workspace);
  if (have_sums) {
    partial_grad_sums<<<dim3(unsigned(s.C), unsigned(chunks)), kThreads, 0, stream>>>(
        s, chunk, x, dy, save_mean, partials);
    gpu::check_launch("batch_norm_backward (partial_grad_sums)");
  }
  // Without dx only the chunk-0 blocks (the parameter gradients) have work.
  const dim3 grid(unsigned(s.C), dx ? unsigned(chunks) : 1u);
  backward_apply<<<grid, kThreads, 0, stream>>>(s, chunk, x, dy, partials, chunks, have_sums, out,
                                                dx);
  gpu::check_launch("batch_norm_backward (backward_apply)");
}

}  // namespace crema::kernels::cuda
