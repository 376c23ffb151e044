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
// - kernel 1 loads a run of 4 rows (kMomentRunRows, kGradRunRows) before it adds any, every
//   load of the run issued before its first use (longer runs cost registers: 8 rows took 116 and
//   3 blocks an SM became 2);
// - with 16-bit storage it adds a run's values in float, in a fixed pairwise tree, and the run's
//   float sums into the double accumulators: 2 conversions and 2 double adds per channel per run,
//   0.5 a value each, where rows_tiled had 1 conversion and 2 double operations a value forward,
//   2 and 2 backward; f32 keeps rows_tiled's adds value by value in double (the same bits),
//   where DRAM, not the conversions, set the pace;
// - the elementwise kernels load kDeepInFlight = 4 rows (64 bytes of x a thread, 128 with dy)
//   before they store (bf16, sm_90: normalize 79 registers, 3 blocks an SM, 48 KB in flight
//   where rows_tiled had 32 KB; dx 124 registers, 2 blocks, 64 KB where it had 32 KB).
//
// Error of the float runs (u = 2^-24; bf16 / f16 values widen to float exactly, and their squares
// are exact in float: 8- or 11-bit significands give at most 22 bits): a pairwise tree of R
// values rounds each sum at most log2(R) times, so a run's sum is within log2(R) u of the sum of
// its |terms| (Higham, 4.2). Forward, R = 4: sum x within 2u sum|x|, sum x^2 within 2u sum x^2,
// so mean within 2u mean|x| and var = E[x^2] - mean^2 within ~6u (var + mean^2): 3.6e-7
// relative for |mean| <= std, below the 1e-5 the tests allow and the 2^-8 of a bf16 output.
// Backward, R = 4: g * (x - mean) is one more rounding, so sum g within 2u sum|g| and sum g (x -
// mean) within 3u sum|g (x - mean)| -- relative to the sums themselves that is 3u times the
// ratio of sum|g xhat| to |sum g xhat|, a random-walk 3u on average and never worse than the
// 2^-8 of the bf16 dx they feed. A run whose float sums overflow or are not finite (|x| >= 2^64
// in bf16, or inf / NaN inputs) is added value by value in double instead: rows_tiled's result.
// The order is fixed by the shape: the same bits on every run and every GPU.
#pragma once

#include "kernels/batch_norm/batch_norm_rows_tiled_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

constexpr int kMomentRunRows = 4;
constexpr int kGradRunRows = 4;
constexpr int kDeepInFlight = 4;

// Storage types whose values kernel 1 adds in float over a run (squares exact in float).
template <class T>
constexpr bool kFloatRuns = sizeof(T) == 2;

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
// double (rows_tiled's adds, in row order), or, with 16-bit storage, in float over the run and
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

template <int V, class T>
__global__ void partial_moments_deep(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                     const T* x, Sums* partials) {
  const TiledThread<V> t(C, lanes, rows);
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
  Sums sums[V] = {};
  if (t.active) {
    for (int64_t r = r0 + t.row; r < r1; r += int64_t(rows) * kMomentRunRows) {
      float v[kMomentRunRows][V];
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
#pragma unroll
    for (int i = 0; i < V; ++i) mean[i] = save_mean[t.c0 + i];
    const auto g = grad.template channels<V>(t.c0);
    for (int64_t r = r0 + t.row; r < r1; r += int64_t(rows) * kGradRunRows) {
      float v[kGradRunRows][V], gv[kGradRunRows][V], centred[kGradRunRows][V];
      load_run(x, C, t.c0, r, rows, r1, v);
#pragma unroll
      for (int k = 0; k < kGradRunRows; ++k) {
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
  normalize_tiled<V, kDeepInFlight>
      <<<elementwise_grid<kDeepInFlight>(M, tiling), kThreads, 0, stream>>>(
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
  backward_apply_tiled<V, kDeepInFlight>
      <<<elementwise_grid<kDeepInFlight>(M, tiling), kThreads, 0, stream>>>(
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
