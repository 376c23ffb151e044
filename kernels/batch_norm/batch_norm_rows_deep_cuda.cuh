// Batch normalization on CUDA, version rows_deep (BatchNormVersion::rows_deep): rows_tiled
// (batch_norm_rows_tiled_cuda.cuh) with more bytes in flight and less double arithmetic per
// element, on the same tiles, chunks and partials (its workspace, its fallback to split_rows_vec);
// and the launchers that run a version's passes with the policies (`forward_training_version`,
// `backward_version`; production passes `batch_norm_version_for(s)`). Included by
// batch_norm_cuda.cu and batch_norm_relu_cuda.cu only.
//
// Why: in bf16 rows_tiled ran at 41-66% of the copy bandwidth where f32 ran at 70-98% (H200,
// 2026-11-26): a 16-byte load holds 8 values, not 4, so per byte there is twice the arithmetic
// and half the bytes in flight. Its kernel 1 widened every value to double (one F2F.F64, 16 a
// clock per SM, against 64 DFMA) and added it twice in double: 1 conversion and 2 double
// operations per value, 2 and 2 in the gradient sums. Here:
// - kernel 1 loads a run of kRunRows = 4 rows (2 in f16) before it adds any, every load of the
//   run issued before its first use (registers, bf16, sm_90: statistics 83, 3 blocks of 256 an
//   SM, where rows_tiled had 56 and 4; runs of 8 rows took 116 and 2 blocks);
// - with bf16 storage it adds a run's values in float, in a fixed pairwise tree, and the run's
//   float sums into the double accumulators: 2 conversions and 2 double adds per channel per run,
//   0.5 a value each, where rows_tiled had 1 conversion and 2 double operations a value forward,
//   2 and 2 backward; f32 and f16 keep rows_tiled's adds value by value in double (the same
//   bits; f32: DRAM, not the conversions, sets its pace; f16: below);
// - the elementwise kernels load kDeepInFlight = 4 rows (64 bytes of x a thread, 128 with dy)
//   before they store (bf16, sm_90: normalize 78 registers, 3 blocks an SM, 48 KB in flight
//   where rows_tiled had 32 KB; dx 124 registers, 2 blocks, 64 KB where it had 32 KB);
// - every kernel loads its channels' parameters (mean, gamma, invstd, beta, the backward's
//   coefficients) with 16-byte loads where aligned: in bf16 rows_tiled's scalar loads, lanes 32
//   bytes apart, cost 8 cache lines each, 256 L1 wavefronts a warp for normalize's 32 loads
//   against 64 for 16 rows of x (f32: a quarter of that);
// - the elementwise grid gives each thread 4 steps of 4 rows, fewer where that leaves fewer than
//   kFillBlocks blocks (14 x 14 and 7 x 7: one step, one trip to DRAM per thread).
//
// Error of the float runs (bf16 only; u = 2^-24). A bf16 value has 8 significant bits and widens
// to float exactly; its square has at most 16. Forward, R = 4, a pairwise tree: where a run's
// |x| lie within a factor 8 of each other, its squares span at most 6 binades and their sum
// fits in 16 + 6 + 2 = 24 bits -- exact; so is sum x within a factor 2^14. A run with a wider
// spread rounds, by at most 2u of its sum of squares, but such a run lies at least 7/8 of its
// largest |x| from any mean, so its squares are at most ~10 times its share of M var: the variance
// is within ~21u (1.2e-6) relative whatever mean / std is (E[x^2] - mean^2 does not cancel the
// error in: the runs that round carry variance of their own size), and the mean within 2u
// mean|x|. (Squares below 2^-126, |x| < 2^-63, lose bits: at most 2^-149 each.) f16's 11-bit
// squares span 22 bits, a run of 4 may round where the values cluster (mean >> std) and lose
// (mean / std)^2 u of the variance: f16 keeps rows_tiled's double adds.
// Backward, R = 4: g * (x - mean) is one more rounding, so sum g within 2u sum|g| and sum g (x -
// mean) within 3u sum|g (x - mean)|: dgamma within 3u sum|g xhat| absolute (relative to |dgamma|,
// 3u times sum|g xhat| / |sum g xhat|; the roundings are a random walk, ~3u in practice), and dx's
// term xhat_m * dgamma / M moves by at most 3u |xhat_m| mean|g xhat|, far below the 2^-8 of a
// bf16 dx. A run whose float sums overflow or are not finite (|x| >= 2^64, or inf / NaN inputs)
// is added value by value in double instead: rows_tiled's result.
// The order is fixed by the shape: the same bits on every run and every GPU.
#pragma once

#include <type_traits>

#include "kernels/batch_norm/batch_norm_rows_tiled_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kDeepInFlight = 4;

// Storage types whose values kernel 1 adds in float over a run: bf16 (the error bound above).
template <class T>
constexpr bool kFloatRuns = std::is_same_v<T, bf16_t>;

// Rows of a run: 4; 2 in f16, whose 8 values a vector all go through double (4 rows of x and
// the gradient took 136 registers, one block an SM).
template <class T>
constexpr int kRunRows = std::is_same_v<T, f16_t> ? 2 : 4;

// v[0] + ... + v[N - 1] in float, halves added pairwise (N a power of two); v is overwritten.
template <int N>
__device__ float pairwise_sum(float (&v)[N]) {
#pragma unroll
  for (int width = N / 2; width > 0; width /= 2) {
#pragma unroll
    for (int k = 0; k < width; ++k) v[k] = __fadd_rn(v[k], v[k + width]);
  }
  return v[0];
}

// The V channels of this thread in rows r, r + rows, ..., R rows (those at or past r1 read as
// zeros, which add nothing to a sum): every load issued before any value is used.
template <int R, int V, class T>
__device__ void load_run(const T* x, int64_t C, int64_t c0, int64_t r, int rows, int64_t r1,
                         float (&v)[R][V]) {
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int64_t row = r + int64_t(k) * rows;
    if (row < r1) {
      load_floats<V>(x, row * C + c0, v[k]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[k][i] = 0.0f;
    }
  }
}

// sums[i] += (sum_k a[k][i], sum_k a[k][i] * b[k][i]) over a run of R rows: value by value in
// double (rows_tiled's adds, in row order), or, with bf16 storage, in float over the run and
// then once in double (the error bound above); `b` is a itself for the moments.
template <class T, int R, int V>
__device__ void add_run(const float (&a)[R][V], const float (&b)[R][V], Sums (&sums)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) {
    if constexpr (kFloatRuns<T>) {
      float first[R], second[R];
#pragma unroll
      for (int k = 0; k < R; ++k) {
        first[k] = a[k][i];
        second[k] = __fmul_rn(a[k][i], b[k][i]);
      }
      const float run_a = pairwise_sum(first), run_b = pairwise_sum(second);
      if (isfinite(run_a) && isfinite(run_b)) {
        sums[i].a += double(run_a);
        sums[i].b += double(run_b);
        continue;
      }
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
      sums[i].a += double(a[k][i]);
      sums[i].b += double(a[k][i]) * double(b[k][i]);
    }
  }
}

// Channels [c0, c0 + V) of a per-channel float array (`absent` where p is null): V / 4 16-byte
// loads where p is 16-byte aligned (c0 is a multiple of 4), V scalar loads otherwise; the same
// values. Why: a warp's lanes are V channels apart, so each scalar load touches 8 cache lines
// (bf16) and rows_tiled's 32 of them per thread cost the load/store unit more than 8 rows of x.
template <int V>
__device__ void load_channel_params(const float* p, int64_t c0, float absent, float (&out)[V]) {
  if (p == nullptr) {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = absent;
  } else if (reinterpret_cast<uintptr_t>(p) % 16 == 0) {
    const float4* q = reinterpret_cast<const float4*>(p + c0);
#pragma unroll
    for (int k = 0; k < V / 4; ++k) {
      const float4 f = q[k];
      out[4 * k] = f.x;
      out[4 * k + 1] = f.y;
      out[4 * k + 2] = f.z;
      out[4 * k + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = p[c0 + i];
  }
}

// The backward's {a, b, d} = coef[c] of channels [c0, c0 + V): 3 V / 4 16-byte loads where coef
// is 16-byte aligned (12 c0 bytes in: a multiple of 48), V float3 loads otherwise.
template <int V>
__device__ void load_coefficients(const float3* coef, int64_t c0, float (&a)[V], float (&b)[V],
                                  float (&d)[V]) {
  float f[3 * V];
  if (reinterpret_cast<uintptr_t>(coef) % 16 == 0) {
    const float4* q = reinterpret_cast<const float4*>(coef + c0);
#pragma unroll
    for (int k = 0; k < 3 * V / 4; ++k) {
      const float4 v = q[k];
      f[4 * k] = v.x;
      f[4 * k + 1] = v.y;
      f[4 * k + 2] = v.z;
      f[4 * k + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float3 k3 = coef[c0 + i];
      f[3 * i] = k3.x;
      f[3 * i + 1] = k3.y;
      f[3 * i + 2] = k3.z;
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    a[i] = f[3 * i];
    b[i] = f[3 * i + 1];
    d[i] = f[3 * i + 2];
  }
}

template <int V, class T>
__global__ void partial_moments_deep(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                     const T* x, Sums* partials) {
  const TiledThread<V> t(C, lanes, rows);
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
  Sums sums[V] = {};
  if (t.active) {
    for (int64_t r = r0 + t.row; r < r1; r += int64_t(rows) * kRunRows<T>) {
      float v[kRunRows<T>][V];
      load_run(x, C, t.c0, r, rows, r1, v);
      add_run<T>(v, v, sums);
    }
  }
  tiled_column_sums<V>(sums, lanes, rows);
  store_tiled_partials<V>(t, sums, partials);
}

// Sums of g and g * (x - mean) in one pass over x and the gradient, a run of x loaded first (the
// gradient's loads follow; a policy that stores dr orders its own rows).
template <int V, class T, class Grad>
__global__ void partial_grad_sums_deep(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                       const T* x, Grad grad, const float* save_mean,
                                       Sums* partials) {
  const TiledThread<V> t(C, lanes, rows);
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
  Sums sums[V] = {};
  if (t.active) {
    float mean[V];
    load_channel_params(save_mean, t.c0, 0.0f, mean);
    const auto g = grad.template channels<V>(t.c0);
    for (int64_t r = r0 + t.row; r < r1; r += int64_t(rows) * kRunRows<T>) {
      float v[kRunRows<T>][V], gv[kRunRows<T>][V], centred[kRunRows<T>][V];
      load_run(x, C, t.c0, r, rows, r1, v);
#pragma unroll
      for (int k = 0; k < kRunRows<T>; ++k) {
        const int64_t row = r + int64_t(k) * rows;
        if (row < r1) {
          g(row * C + t.c0, v[k], gv[k]);
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) gv[k][i] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < V; ++i) centred[k][i] = v[k][i] - mean[i];
      }
      add_run<T>(gv, centred, sums);
    }
  }
  tiled_column_sums<V>(sums, lanes, rows);
  store_tiled_partials<V>(t, sums, partials);
}

// normalize_tiled with the parameters' 16-byte loads and kDeepInFlight rows in flight: the same
// expressions, so the same bits for the same statistics.
template <int V, class T, class Store>
__global__ void normalize_deep(int64_t M, int64_t C, int lanes, int rows, const T* x,
                               const float* gamma, const float* beta, const float* mean,
                               const float* invstd, Store store) {
  const TiledThread<V> t(C, lanes, rows);
  if (!t.active) return;
  float m[V], g[V], inv[V], scale[V], shift[V];
  load_channel_params(mean, t.c0, 0.0f, m);
  load_channel_params(gamma, t.c0, 1.0f, g);
  load_channel_params(invstd, t.c0, 0.0f, inv);
  load_channel_params(beta, t.c0, 0.0f, shift);
#pragma unroll
  for (int i = 0; i < V; ++i) scale[i] = g[i] * inv[i];
  normalize_tiled_rows<V, kDeepInFlight>(M, C, t, rows, x, m, scale, shift, store);
}

// backward_apply_tiled with the parameters' 16-byte loads and kDeepInFlight rows in flight.
template <int V, class T, class Grad>
__global__ void backward_apply_deep(int64_t M, int64_t C, int lanes, int rows, const T* x,
                                    Grad grad, const float* mean, const float3* coef, T* dx) {
  const TiledThread<V> t(C, lanes, rows);
  if (!t.active) return;
  float m[V], a[V], b[V], d[V];
  load_channel_params(mean, t.c0, 0.0f, m);
  load_coefficients(coef, t.c0, a, b, d);
  const auto g = grad.template channels<V>(t.c0);
  backward_apply_tiled_rows<V, kDeepInFlight>(M, C, t, rows, x, g, m, a, b, d, dx);
}

// The elementwise grid: steps of kDeepInFlight rows per thread, 4 (the parameters' loads shared
// by 16 rows) where that still gives kFillBlocks blocks, fewer down to 1 on small shapes, where a
// thread's serial trips to DRAM, not its parameters, set the time (results do not depend on it).
constexpr int64_t kFillBlocks = 1024;  // ~8 per SM of an H100 / H200: 2 to 3 resident waves

inline dim3 deep_elementwise_grid(int64_t M, const RowTiling& t) {
  int steps = 4;
  while (steps > 1 &&
         int64_t(t.tiles) * ceil_div(M, int64_t(t.rows) * kDeepInFlight * steps) < kFillBlocks) {
    steps /= 2;
  }
  return dim3(unsigned(t.tiles), elementwise_row_blocks(M, t, kDeepInFlight * steps));
}

// rows_deep's training forward (S == 1): statistics, then store(j, x, z) for every element.
template <class T, class Store>
void forward_training_rows_deep(const BatchNormShape& s, const T* x, const float* gamma,
                                const float* beta, const TrainingOutputs& out, Store store,
                                void* workspace, gpu::Stream stream, const char* op) {
  constexpr int V = kPerVector<T>;
  if (!rows_vectorizable(s, x) || !store.vectorizable()) {
    forward_training_rows_vec(s, x, gamma, beta, out, store, workspace, stream, op);
    return;
  }
  const int64_t M = s.N, C = s.C;
  const RowTiling tiling = row_tiling(C, V);
  const int chunks = tiled_chunk_count(M, tiling);
  Sums* partials = static_cast<Sums*>(workspace);
  partial_moments_deep<V><<<dim3(unsigned(tiling.tiles), unsigned(chunks)), kThreads, 0, stream>>>(
      M, C, tiled_chunk_length(M, tiling), tiling.lanes, tiling.rows, x, partials);
  gpu::check_launch(op);
  finish_moments_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(C, double(M), chunks,
                                                                              partials, out);
  gpu::check_launch(op);
  normalize_deep<V><<<deep_elementwise_grid(M, tiling), kThreads, 0, stream>>>(
      M, C, tiling.lanes, tiling.rows, x, gamma, beta, out.save_mean, out.save_invstd, store);
  gpu::check_launch(op);
}

// rows_deep's backward (S == 1): `first` gives the gradient at z to the sums (and may store dr),
// `second` to dx.
template <class T, class First, class Second>
void backward_rows_deep(const BatchNormShape& s, const T* x, const BackwardOutputs& out,
                        bool have_sums, First first, Second second, T* dx, void* workspace,
                        gpu::Stream stream, const char* op) {
  constexpr int V = kPerVector<T>;
  if (!rows_vectorizable(s, x) || !aligned16(dx) || !first.vectorizable() ||
      !second.vectorizable()) {
    backward_rows_vec(s, x, out, have_sums, first, second, dx, workspace, stream, op);
    return;
  }
  const int64_t M = s.N, C = s.C;
  const RowTiling tiling = row_tiling(C, V);
  const int chunks = tiled_chunk_count(M, tiling);
  Sums* partials = static_cast<Sums*>(workspace);
  float3* coef = reinterpret_cast<float3*>(partials + C * chunks);
  if (have_sums) {
    partial_grad_sums_deep<V>
        <<<dim3(unsigned(tiling.tiles), unsigned(chunks)), kThreads, 0, stream>>>(
            M, C, tiled_chunk_length(M, tiling), tiling.lanes, tiling.rows, x, first, out.save_mean,
            partials);
    gpu::check_launch(op);
  }
  finish_grad_sums_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(
      C, double(M), chunks, partials, have_sums, out, coef);
  gpu::check_launch(op);
  if (!dx) return;
  backward_apply_deep<V><<<deep_elementwise_grid(M, tiling), kThreads, 0, stream>>>(
      M, C, tiling.lanes, tiling.rows, x, second, out.save_mean, coef, dx);
  gpu::check_launch(op);
}

// The batch-statistics passes of `version` (not block_per_channel, whose kernels take no
// policies): the fused kernels and the plain ones call these, production with
// batch_norm_version_for(s). The row versions need S == 1 (the callers check).
template <class T, class Store>
void forward_training_version(BatchNormVersion version, const BatchNormShape& s, const T* x,
                              const float* gamma, const float* beta, const TrainingOutputs& out,
                              Store store, void* workspace, gpu::Stream stream, const char* op) {
  if (version == BatchNormVersion::rows_deep) {
    forward_training_rows_deep(s, x, gamma, beta, out, store, workspace, stream, op);
  } else if (version == BatchNormVersion::rows_tiled) {
    forward_training_rows_tiled(s, x, gamma, beta, out, store, workspace, stream, op);
  } else if (version == BatchNormVersion::split_rows_vec) {
    forward_training_rows_vec(s, x, gamma, beta, out, store, workspace, stream, op);
  } else if (version == BatchNormVersion::split_rows) {
    forward_training_rows(s, x, gamma, beta, out, store, workspace, stream, op);
  } else {
    forward_training_split(s, x, gamma, beta, out, store, workspace, stream, op);
  }
}

template <class T, class First, class Second>
void backward_version(BatchNormVersion version, const BatchNormShape& s, const T* x,
                      const BackwardOutputs& out, bool have_sums, First first, Second second, T* dx,
                      void* workspace, gpu::Stream stream, const char* op) {
  if (version == BatchNormVersion::rows_deep) {
    backward_rows_deep(s, x, out, have_sums, first, second, dx, workspace, stream, op);
  } else if (version == BatchNormVersion::rows_tiled) {
    backward_rows_tiled(s, x, out, have_sums, first, second, dx, workspace, stream, op);
  } else if (version == BatchNormVersion::split_rows_vec) {
    backward_rows_vec(s, x, out, have_sums, first, second, dx, workspace, stream, op);
  } else if (version == BatchNormVersion::split_rows) {
    backward_rows(s, x, out, have_sums, first, second, dx, workspace, stream, op);
  } else {
    backward_split(s, x, out, have_sums, first, second, dx, workspace, stream, op);
  }
}

}  // namespace
}  // namespace crema::kernels::cuda
