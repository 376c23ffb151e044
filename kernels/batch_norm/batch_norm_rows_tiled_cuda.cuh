// Batch normalization on CUDA, version rows_tiled (BatchNormVersion::rows_tiled): split_rows_vec
// (batch_norm_rows_vec_cuda.cuh) with every thread on a fixed group of V = 16 / sizeof(T)
// channels, where C % V == 0 and every pointer is 16-byte aligned (split_rows_vec's conditions;
// it falls back to that version, which falls back to split_rows); the inference kernel every
// version runs where S == 1; and the launchers that run a version's passes with the policies.
// Included by batch_norm_cuda.cu and batch_norm_relu_cuda.cu only.
//
// Why: split_rows_vec's elementwise kernels find a vector's channel as e % C and load gamma,
// invstd, mean and beta (or the backward's float3 coefficients and the mean) for each of its V
// values: 32 scalar loads per 16 bytes moved, the 32 lanes of a warp on 8 different cache lines
// each time, so the load/store unit and not DRAM set their pace. Here a block is a 2-D tile:
// `lanes` threads across a row's C / V vectors (the whole row when C / V <= 256, else the row cut
// into equal tiles), kThreads / lanes rows, and each thread walks rows of its tile in steps that
// keep its channels. It loads its V channels' parameters into registers once; the values it
// computes are split_rows_vec's expressions element by element (the same bits for y and dx given
// the same statistics). With one tile a block reads whole rows: one contiguous span a step.
//
// The elementwise kernels walk their rows through pipelined_rows (batch_norm_rows_tile_cuda.cuh):
// the loads of 2 or 3 rows (kRowsInFlight) -- x and what the policy reads beside it (r, dy, y or
// dr), kept packed -- are in flight before the stores of the row before them (a store may alias
// its own row's loads, never another row's), so a policy that loads or stores (StoreRelu's r,
// ReluGrad's dr) does not serialize a thread's rows. Kernel 1 does too where its gradient may
// store (ReluGrad in bf16 / f16); where it only loads, its unrolled loop's loads are hoisted.
//
// Kernel 1 (statistics or gradient sums) runs on the same tile over a chunk of rows (grid: row
// tiles x chunks of 16 rows a thread, at most kMaxChunks: the partials' layout follows the shape
// only, never the GPU); each thread adds its rows in double, then the block adds the threads of a
// column: with warp shuffles and a few barriers where lanes divides 32 (C / V <= 32), else in a
// fixed tree through shared memory, one channel of the V at a time. Kernel 2 is split_rows'.
// No atomics: the same bits on every run; the order of the adds differs from split_rows_vec's.
#pragma once

#include "kernels/batch_norm/batch_norm_rows_tile_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

template <int V, class T>
__global__ void partial_moments_tiled(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                      const T* x, Sums* partials) {
  const TiledThread<V> t(C, lanes, rows);
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
  Sums sums[V] = {};
  if (t.active) {
#pragma unroll 4  // several 16-byte loads in flight per thread; the adds keep their order
    for (int64_t r = r0 + t.row; r < r1; r += rows) {
      float v[V];
      load_floats<V>(x, r * C + t.c0, v);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        sums[i].a += double(v[i]);
        sums[i].b += double(v[i]) * double(v[i]);
      }
    }
  }
  store_tiled_partials<V>(t, sums, lanes, rows, partials);
}

// Sums of g and g * (x - mean) in one pass over x and the gradient. A gradient that may store (the
// fused pass 1's dr) orders each row's loads after the last row's store in a plain loop, so with
// kPipelined its rows go through pipelined_rows, 2 in flight (the sums' doubles leave no room for
// more); a gradient that only loads lets the compiler hoist an unrolled loop's loads.
template <bool kPipelined, int V, class T, class Grad>
__device__ void grad_sums_tiled(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                const T* x, const Grad& grad, const float* save_mean,
                                Sums* partials) {
  const TiledThread<V> t(C, lanes, rows);
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
  Sums sums[V] = {};
  if (t.active) {
    float mean[V];
#pragma unroll
    for (int i = 0; i < V; ++i) mean[i] = save_mean[t.c0 + i];
    const auto g = grad.template channels<V>(t.c0);
    const auto add = [&](const float (&v)[V], const float (&gj)[V]) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        sums[i].a += double(gj[i]);
        sums[i].b += double(gj[i]) * double(v[i] - mean[i]);
      }
    };
    if constexpr (kPipelined) {
      using Loads = RowLoads<T, V, decltype(g.fetch(0))>;
      const auto fetch = [&](int64_t j) {
        Loads l;
        l.x.load(x, j);
        l.more = g.fetch(j);
        return l;
      };
      const auto use = [&](int64_t j, const Loads& l) {
        float v[V], gj[V];
        l.x.widen(v);
        g(j, v, l.more, gj);
        add(v, gj);
      };
      pipelined_rows<2, Loads>((r0 + t.row) * C + t.c0, rows * C, r1 * C, fetch, use);
    } else {
#pragma unroll 4
      for (int64_t r = r0 + t.row; r < r1; r += rows) {
        const int64_t j = r * C + t.c0;
        float v[V], gj[V];
        load_floats<V>(x, j, v);
        g(j, v, gj);
        add(v, gj);
      }
    }
  }
  store_tiled_partials<V>(t, sums, lanes, rows, partials);
}

template <int V, class T, class Grad>
__global__ void partial_grad_sums_tiled(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                        const T* x, Grad grad, const float* save_mean,
                                        Sums* partials) {
  grad_sums_tiled<false, V>(M, C, chunk, lanes, rows, x, grad, save_mean, partials);
}

// The pipelined form, for a gradient that may store in bf16 / f16 (the latency-bound case),
// within the 128 registers that give it 2 blocks an SM, as the plain loop had.
template <int V, class T, class Grad>
__global__ void __launch_bounds__(kThreads, 2)
    partial_grad_sums_pipelined(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
                                const T* x, Grad grad, const float* save_mean, Sums* partials) {
  grad_sums_tiled<true, V>(M, C, chunk, lanes, rows, x, grad, save_mean, partials);
}

// z = (x - mean[c]) * scale[c] + shift[c] for this thread's rows, mean, scale = gamma[c] *
// invstd[c] and shift = beta[c] held in registers (normalize_rows_vec's expression); writes
// store.vec(j, x, z, ...) with what store.fetch loaded beside x (r), kRowsInFlight rows in flight.
template <int V, class T, class Store>
__device__ void normalize_tiled_rows(int64_t M, int64_t C, const TiledThread<V>& t, int rows,
                                     const T* x, const float (&mean)[V], const float (&scale)[V],
                                     const float (&shift)[V], const Store& store) {
  using Loads = RowLoads<T, V, decltype(store.template fetch<V>(0))>;
  constexpr int kSlots = kRowsInFlight<T, 1 + Store::kLoads>;
  const auto fetch = [&](int64_t j) {
    Loads l;
    l.x.load(x, j);
    l.more = store.template fetch<V>(j);
    return l;
  };
  const auto use = [&](int64_t j, const Loads& l) {
    float v[V], z[V];
    l.x.widen(v);
#pragma unroll
    for (int i = 0; i < V; ++i) z[i] = normalized(v[i], mean[i], scale[i], shift[i]);
    store.template vec<V>(j, v, z, l.more);
  };
  const RowWalk w(t.row, rows);
  pipelined_rows<kSlots, Loads>(w.first * C + t.c0, w.stride * C, M * C, fetch, use);
}

template <int V, class T, class Store>
__global__ void normalize_tiled(int64_t M, int64_t C, int lanes, int rows, const T* x,
                                const float* gamma, const float* beta, const float* mean,
                                const float* invstd, Store store) {
  const TiledThread<V> t(C, lanes, rows);
  if (!t.active) return;
  float m[V], scale[V], shift[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t c = t.c0 + i;
    m[i] = mean[c];
    scale[i] = (gamma ? gamma[c] : 1.0f) * invstd[c];
    shift[i] = beta ? beta[c] : 0.0f;
  }
  normalize_tiled_rows<V>(M, C, t, rows, x, m, scale, shift, store);
}

// The inference forward with the running statistics (normalize_inference's expressions); the
// row-0 threads of the first row block save them for the backward.
template <int V, class T, class Store>
__global__ void normalize_inference_tiled(int64_t M, int64_t C, int lanes, int rows, const T* x,
                                          const float* gamma, const float* beta,
                                          const float* running_mean, const float* running_var,
                                          float eps, Store store, float* save_mean,
                                          float* save_invstd) {
  const TiledThread<V> t(C, lanes, rows);
  if (!t.active) return;
  float m[V], scale[V], shift[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t c = t.c0 + i;
    const float invstd = 1.0f / sqrtf(running_var[c] + eps);
    m[i] = running_mean[c];
    scale[i] = (gamma ? gamma[c] : 1.0f) * invstd;
    shift[i] = beta ? beta[c] : 0.0f;
    if (blockIdx.y == 0 && t.row == 0) {
      save_mean[c] = m[i];
      save_invstd[c] = invstd;
    }
  }
  normalize_tiled_rows<V>(M, C, t, rows, x, m, scale, shift, store);
}

// dx = a * (g - b - (x - mean) * d) with {a, b, d} = coef[c] and mean[c] in registers
// (backward_apply_rows_vec's expression); g from `grad`, kRowsInFlight rows in flight.
template <int V, class T, class Grad>
__global__ void backward_apply_tiled(int64_t M, int64_t C, int lanes, int rows, const T* x,
                                     Grad grad, const float* mean, const float3* coef, T* dx) {
  const TiledThread<V> t(C, lanes, rows);
  if (!t.active) return;
  float m[V], a[V], b[V], d[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const float3 k3 = coef[t.c0 + i];
    m[i] = mean[t.c0 + i];
    a[i] = k3.x;
    b[i] = k3.y;
    d[i] = k3.z;
  }
  const auto g = grad.template channels<V>(t.c0);
  using Loads = RowLoads<T, V, decltype(g.fetch(0))>;
  constexpr int kSlots = kRowsInFlight<T, 1 + Grad::kLoads>;
  const auto fetch = [&](int64_t j) {
    Loads l;
    l.x.load(x, j);
    l.more = g.fetch(j);
    return l;
  };
  const auto use = [&](int64_t j, const Loads& l) {
    float v[V], gv[V], out[V];
    l.x.widen(v);
    g(j, v, l.more, gv);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = a[i] * (gv[i] - b[i] - (v[i] - m[i]) * d[i]);
    store_floats<V>(dx, j, out);
  };
  const RowWalk w(t.row, rows);
  pipelined_rows<kSlots, Loads>(w.first * C + t.c0, w.stride * C, M * C, fetch, use);
}

inline dim3 elementwise_grid(int64_t M, const RowTiling& t) {
  return dim3(unsigned(t.tiles), elementwise_row_blocks(M, t));
}

// rows_tiled's training forward (S == 1): statistics, then store(j, x, z) for every element.
template <class T, class Store>
void forward_training_rows_tiled(const BatchNormShape& s, const T* x, const float* gamma,
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
  partial_moments_tiled<V><<<dim3(unsigned(tiling.tiles), unsigned(chunks)), kThreads, 0, stream>>>(
      M, C, tiled_chunk_length(M, tiling), tiling.lanes, tiling.rows, x, partials);
  gpu::check_launch(op);
  finish_moments_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(C, double(M), chunks,
                                                                              partials, out);
  gpu::check_launch(op);
  normalize_tiled<V><<<elementwise_grid(M, tiling), kThreads, 0, stream>>>(
      M, C, tiling.lanes, tiling.rows, x, gamma, beta, out.save_mean, out.save_invstd, store);
  gpu::check_launch(op);
}

// rows_tiled's backward (S == 1): `first` gives the gradient at z to the sums (and may store dr),
// `second` to dx.
template <class T, class First, class Second>
void backward_rows_tiled(const BatchNormShape& s, const T* x, const BackwardOutputs& out,
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
    const dim3 grid(unsigned(tiling.tiles), unsigned(chunks));
    const int64_t chunk = tiled_chunk_length(M, tiling);
    if constexpr (First::kMayStore && sizeof(T) == 2) {
      partial_grad_sums_pipelined<V><<<grid, kThreads, 0, stream>>>(
          M, C, chunk, tiling.lanes, tiling.rows, x, first, out.save_mean, partials);
    } else {
      partial_grad_sums_tiled<V><<<grid, kThreads, 0, stream>>>(
          M, C, chunk, tiling.lanes, tiling.rows, x, first, out.save_mean, partials);
    }
    gpu::check_launch(op);
  }
  finish_grad_sums_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(
      C, double(M), chunks, partials, have_sums, out, coef);
  gpu::check_launch(op);
  if (!dx) return;
  backward_apply_tiled<V><<<elementwise_grid(M, tiling), kThreads, 0, stream>>>(
      M, C, tiling.lanes, tiling.rows, x, second, out.save_mean, coef, dx);
  gpu::check_launch(op);
}

// The inference forward of every version: rows_tiled's kernel where S == 1 and the 16-byte form
// applies, the elementwise kernel of batch_norm_cuda.cuh otherwise.
template <class T, class Store>
void forward_inference_best(const BatchNormShape& s, const T* x, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var,
                            float eps, Store store, float* save_mean, float* save_invstd,
                            gpu::Stream stream, const char* op) {
  constexpr int V = kPerVector<T>;
  if (s.S != 1 || s.N == 0 || s.C == 0 || !rows_vectorizable(s, x) || !store.vectorizable()) {
    forward_inference(s, x, gamma, beta, running_mean, running_var, eps, store, save_mean,
                      save_invstd, stream, op);
    return;
  }
  const RowTiling tiling = row_tiling(s.C, V);
  normalize_inference_tiled<V><<<elementwise_grid(s.N, tiling), kThreads, 0, stream>>>(
      s.N, s.C, tiling.lanes, tiling.rows, x, gamma, beta, running_mean, running_var, eps, store,
      save_mean, save_invstd);
  gpu::check_launch(op);
}

// The batch-statistics passes of `version` (not block_per_channel, whose kernels take no
// policies): the fused kernels and the plain ones call these, production with
// batch_norm_version_for(s). The row versions need S == 1 (the callers check).
template <class T, class Store>
void forward_training_version(BatchNormVersion version, const BatchNormShape& s, const T* x,
                              const float* gamma, const float* beta, const TrainingOutputs& out,
                              Store store, void* workspace, gpu::Stream stream, const char* op) {
  if (version == BatchNormVersion::rows_tiled) {
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
  if (version == BatchNormVersion::rows_tiled) {
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
