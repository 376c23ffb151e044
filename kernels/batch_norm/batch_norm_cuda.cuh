// Batch normalization on CUDA, what the plain kernels (batch_norm_cuda.cu) and the fused ones
// (batch_norm_relu_cuda.cu) share: the deterministic sums, the per-channel finishing steps, and
// split_channel's kernels and launchers (split_rows' are in batch_norm_rows_cuda.cuh, which
// includes this file), templated on the activations' storage type T (float, bf16_t, f16_t:
// widened to float on load, rounded once on store) and on two policies -- `store(j, x, z)`, what
// the forward writes for each normalized value, and `grad.channel(c)(j, x)`, the gradient at z
// the backward reads. Included by those two .cu files only, through batch_norm_rows_cuda.cuh;
// README.md describes the versions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/common/float16_cuda.cuh"
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

// z = (x - mean) * scale + shift, one rounding for the product and the add: every pass that
// normalizes, and the fused backward that recomputes z, round it alike.
__device__ inline float normalized(float x, float mean, float scale, float shift) {
  return __fmaf_rn(x - mean, scale, shift);
}

// --- the policies: what the forward stores for z, where the backward's gradient comes from ---

// Policies come in two widths: one element (`operator()`, `channel(c)`) and V consecutive
// channels of one row (`vec`, `channels<V>(c0)`: 16-byte loads and stores, split_rows_vec);
// `vectorizable()` says whether every pointer they touch allows the 16-byte form.
inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;  // nullptr too: an absent tensor is no obstacle
}

// V consecutive elements of T as memory holds them, loaded but not yet widened: 16-byte loads
// where V * sizeof(T) is a multiple of 16 (the caller checks the alignment), else one element at
// a time. rows_tiled keeps its loads packed until it computes (8 bf16 in 4 registers, not 8
// floats); widen() gives load_floats' floats.
template <class T, int V, bool kVector = (V * sizeof(T)) % 16 == 0>
struct Packed {
  static constexpr int kWords = int(V * sizeof(T) / 16);
  uint4 raw[kWords];
  __device__ void load(const T* p, int64_t j) {
#pragma unroll
    for (int k = 0; k < kWords; ++k) raw[k] = reinterpret_cast<const uint4*>(p + j)[k];
  }
  __device__ void widen(float (&out)[V]) const {
    T elements[V];
    memcpy(elements, raw, sizeof(elements));
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = to_float(elements[e]);
  }
};

template <class T, int V>
struct Packed<T, V, false> {
  T elements[V];
  __device__ void load(const T* p, int64_t j) {
#pragma unroll
    for (int e = 0; e < V; ++e) elements[e] = p[j + e];
  }
  __device__ void widen(float (&out)[V]) const {
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = to_float(elements[e]);
  }
};

// The vector forms come in two steps for rows_tiled, which issues the loads of several rows before
// it stores any: `fetch<V>(j)` (store policies) or `fetch(j)` (the gradient's channels) loads
// what the policy reads at element j, packed; the step that computes and stores takes it. The
// one-step forms are fetch-then-compute at the same element.
template <class T>
struct StoreZ {
  static constexpr int kLoads = 0;  // 16-byte loads of a vector beside x's (rows_tiled)
  T* y;
  __device__ void operator()(int64_t j, float, float z) const { y[j] = from_float<T>(z); }
  template <int V>
  struct Inputs {};  // nothing but x
  template <int V>
  __device__ Inputs<V> fetch(int64_t) const {
    return {};
  }
  template <int V>
  __device__ void vec(int64_t j, const float (&)[V], const float (&z)[V], const Inputs<V>&) const {
    store_floats<V>(y, j, z);
  }
  template <int V>
  __device__ void vec(int64_t j, const float (&x)[V], const float (&z)[V]) const {
    vec<V>(j, x, z, Inputs<V>{});
  }
  bool vectorizable() const { return aligned16(y); }
};

// The gradient as stored: dy for the plain backward, the fused pass 1's dr in its pass 2.
template <class T>
struct LoadGrad {
  static constexpr int kLoads = 1;
  static constexpr bool kMayStore = false;  // whether the gradient's step may store (rows_tiled)
  const T* g;
  template <int V>
  struct Channels {
    const T* g;
    struct Inputs {
      Packed<T, V> g;
    };
    __device__ float operator()(int64_t j, float) const { return to_float(g[j]); }
    __device__ Inputs fetch(int64_t j) const {
      Inputs in;
      in.g.load(g, j);
      return in;
    }
    __device__ void operator()(int64_t, const float (&)[V], const Inputs& in,
                               float (&out)[V]) const {
      in.g.widen(out);
    }
    __device__ void operator()(int64_t j, const float (&x)[V], float (&out)[V]) const {
      (*this)(j, x, fetch(j), out);
    }
  };
  __device__ Channels<1> channel(int64_t) const { return {g}; }
  template <int V>
  __device__ Channels<V> channels(int64_t) const {
    return {g};
  }
  bool vectorizable() const { return aligned16(g); }
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

// --- v2: split_channel, grid (C, chunks); partials[c * chunks + chunk] ---

template <class T>
__global__ void partial_moments(BatchNormShape s, int64_t chunk, const T* x, Sums* partials) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  Sums sums{0.0, 0.0};
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const double v = double(to_float(x[ch.offset(c, k)]));
    sums.a += v;
    sums.b += v * v;
  }
  sums = block_sum(sums);
  if (threadIdx.x == 0) partials[c * gridDim.y + blockIdx.y] = sums;
}

// Sums of g and g * (x - mean), g the gradient at z that `grad` gives.
template <class T, class Grad>
__global__ void partial_grad_sums(BatchNormShape s, int64_t chunk, const T* x, Grad grad,
                                  const float* save_mean, Sums* partials) {
  const int64_t c = blockIdx.x;
  const Channel ch{s.C, s.S};
  const Range r = chunk_range(s.N * s.S, chunk);
  const float mean = save_mean[c];
  const auto g = grad.channel(c);
  Sums sums{0.0, 0.0};
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    const float v = to_float(x[j]);
    const float gj = g(j, v);
    sums.a += double(gj);
    sums.b += double(gj) * double(v - mean);
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

template <class T, class Store>
__global__ void normalize_training(BatchNormShape s, int64_t chunk, const T* x, const float* gamma,
                                   const float* beta, const Sums* partials, TrainingOutputs out,
                                   Store store) {
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
    const float v = to_float(x[j]);
    store(j, v, normalized(v, m, sc, shift));
  }
}

// `have_sums`: partials hold sum g and sum g*(x - mean); without them (fixed statistics and
// no parameter gradients) only dx = gamma * invstd * g is written.
template <class T, class Grad>
__global__ void backward_apply(BatchNormShape s, int64_t chunk, const T* x, Grad grad,
                               const Sums* partials, int chunks, bool have_sums,
                               BackwardOutputs out, T* dx) {
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
  const auto g = grad.channel(c);
  for (unsigned k = r.k0 + threadIdx.x; k < r.k1; k += kThreads) {
    const int64_t j = ch.offset(c, k);
    const float v = to_float(x[j]);
    dx[j] = from_float<T>(k3.x * (g(j, v) - k3.y - (v - mean) * k3.z));
  }
}

// --- inference forward: elementwise, either version ---

template <class Index, class T, class Store>
__global__ void normalize_inference(Index total, Index C, Index S, const T* x, const float* gamma,
                                    const float* beta, const float* running_mean,
                                    const float* running_var, float eps, Store store,
                                    float* save_mean, float* save_invstd) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    const Index c = (e / S) % C;
    const float invstd = 1.0f / sqrtf(running_var[c] + eps);
    if (e < C) {
      save_mean[e] = running_mean[e];
      save_invstd[e] = 1.0f / sqrtf(running_var[e] + eps);
    }
    const float scale = (gamma ? gamma[c] : 1.0f) * invstd;
    const float v = to_float(x[e]);
    store(e, v, normalized(v, running_mean[c], scale, beta ? beta[c] : 0.0f));
  }
}

// Values per chunk for a channel of M values: kChunk, or more when that would give more than
// kMaxChunks chunks.
inline int64_t chunk_length(int64_t M) {
  const int64_t by_limit = (M + kMaxChunks - 1) / kMaxChunks;
  return by_limit > kChunk ? by_limit : kChunk;
}

inline int chunk_count(int64_t M) {
  const int64_t chunk = chunk_length(M);
  const int64_t chunks = (M + chunk - 1) / chunk;
  return int(chunks < 1 ? 1 : chunks);
}

// split_channel's training forward: statistics, then store(j, x, z) for every element.
template <class T, class Store>
void forward_training_split(const BatchNormShape& s, const T* x, const float* gamma,
                            const float* beta, const TrainingOutputs& out, Store store,
                            void* workspace, gpu::Stream stream, const char* op) {
  const int64_t M = s.N * s.S, chunk = chunk_length(M);
  const dim3 grid(unsigned(s.C), unsigned(chunk_count(M)));
  Sums* partials = static_cast<Sums*>(workspace);
  partial_moments<<<grid, kThreads, 0, stream>>>(s, chunk, x, partials);
  gpu::check_launch(op);
  normalize_training<<<grid, kThreads, 0, stream>>>(s, chunk, x, gamma, beta, partials, out, store);
  gpu::check_launch(op);
}

template <class T, class Store>
void forward_inference(const BatchNormShape& s, const T* x, const float* gamma, const float* beta,
                       const float* running_mean, const float* running_var, float eps, Store store,
                       float* save_mean, float* save_invstd, gpu::Stream stream, const char* op) {
  const int64_t total = s.N * s.C * s.S;
  if (total == 0) return;
  const int blocks = blocks_for(total, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    normalize_inference<unsigned><<<blocks, kThreads, 0, stream>>>(
        unsigned(total), unsigned(s.C), unsigned(s.S), x, gamma, beta, running_mean, running_var,
        eps, store, save_mean, save_invstd);
  } else {
    normalize_inference<int64_t><<<blocks, kThreads, 0, stream>>>(total, s.C, s.S, x, gamma, beta,
                                                                  running_mean, running_var, eps,
                                                                  store, save_mean, save_invstd);
  }
  gpu::check_launch(op);
}

// split_channel's backward: `first` gives the gradient at z to the sums (and may store dr),
// `second` to dx.
template <class T, class First, class Second>
void backward_split(const BatchNormShape& s, const T* x, const BackwardOutputs& out, bool have_sums,
                    First first, Second second, T* dx, void* workspace, gpu::Stream stream,
                    const char* op) {
  const int64_t M = s.N * s.S, chunk = chunk_length(M);
  const int chunks = chunk_count(M);
  Sums* partials = static_cast<Sums*>(workspace);
  if (have_sums) {
    partial_grad_sums<<<dim3(unsigned(s.C), unsigned(chunks)), kThreads, 0, stream>>>(
        s, chunk, x, first, out.save_mean, partials);
    gpu::check_launch(op);
  }
  // Without dx only the chunk-0 blocks (the parameter gradients) have work.
  const dim3 grid(unsigned(s.C), dx ? unsigned(chunks) : 1u);
  backward_apply<<<grid, kThreads, 0, stream>>>(s, chunk, x, second, partials, chunks, have_sums,
                                                out, dx);
  gpu::check_launch(op);
}

}  // namespace
}  // namespace crema::kernels::cuda
