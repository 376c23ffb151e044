// Batch normalization on CUDA, version split_rows_vec (BatchNormVersion::split_rows_vec):
// split_rows (batch_norm_rows_cuda.cuh) with 16-byte loads and stores -- a thread moves V =
// 16 / sizeof(T) consecutive channels of a row (8 bf16 / f16, 4 f32) in every kernel that
// touches the activations -- where C % V == 0 and every pointer is 16-byte aligned, split_rows
// otherwise. Included through batch_norm_rows_tiled_cuda.cuh only (rows_tiled falls back to it).
//
// Kernel 1, grid (tiles of L * V channels, chunks of rows), L = `lanes` a power of two <= 32 with
// L * V <= C: thread t reads V channels of rows t / L, t / L + 256 / L, ... (L threads cover a
// tile's row: 512 bytes of one row per warp when L = 32); each thread keeps V double pairs, and
// thread k < L * V adds column k of the 256 / L rows' sums in row order. Kernel 2 is split_rows'
// (the chunks' partials in chunk order); kernel 3 is elementwise over the M * C / V vectors.
// Backward kernel 1 reads x and the gradient once for both sums. No atomics: the same bits on
// every run; the order of the adds differs from split_rows', so the statistics may differ from
// it in the last bit, not from run to run.
#pragma once

#include "kernels/batch_norm/batch_norm_rows_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// Threads per row of a tile: the largest power of two <= 32 whose L * V channels fit in C.
inline int vec_lanes(int64_t C, int V) {
  int lanes = 32;
  while (lanes > 1 && int64_t(lanes) * V > C) lanes /= 2;
  return lanes;
}

// Rows per chunk: split_rows' or longer (so that its workspace holds the partials), at least 16
// loads per thread when C is narrow (C = 64 bf16: 8 threads a row, 512 rows a chunk).
inline int64_t vec_chunk_length(int64_t M, int lanes) {
  const int64_t at_least = 16 * int64_t(kThreads / lanes);
  return row_chunk_length(M) > at_least ? row_chunk_length(M) : at_least;
}

inline int vec_chunk_count(int64_t M, int lanes) {
  const int64_t chunks = ceil_div(M, vec_chunk_length(M, lanes));
  return int(chunks < 1 ? 1 : chunks);
}

// This thread's channels [c0, c0 + V) and its chunk's rows [r0, r1), from r0 + row in steps of
// kThreads / lanes.
template <int V>
struct VecTile {
  int64_t c0, r0, r1;
  int row;
  __device__ VecTile(int64_t M, int64_t C, int64_t chunk, int lanes) {
    c0 = (int64_t(blockIdx.x) * lanes + int(threadIdx.x) % lanes) * V;
    row = int(threadIdx.x) / lanes;
    r0 = int64_t(blockIdx.y) * chunk;
    r1 = r0 + chunk < M ? r0 + chunk : M;
    if (c0 >= C) r1 = r0;  // threads past the last channel add nothing
  }
};

// Column threadIdx.x (channel tile + threadIdx.x) of the block's per-row sums, added in row
// order; valid for threadIdx.x < lanes * V. Every thread must call it.
template <int V>
__device__ Sums vec_column_sum(const Sums (&v)[V], int lanes) {
  __shared__ Sums cells[kThreads * V];  // [kThreads / lanes rows][lanes * V columns]
  const int width = lanes * V, rows = kThreads / lanes;
  const int base = int(threadIdx.x) / lanes * width + int(threadIdx.x) % lanes * V;
#pragma unroll
  for (int i = 0; i < V; ++i) cells[base + i] = v[i];
  __syncthreads();
  Sums total{0.0, 0.0};
  if (int(threadIdx.x) < width) {
    for (int r = 0; r < rows; ++r) {
      total.a += cells[r * width + int(threadIdx.x)].a;
      total.b += cells[r * width + int(threadIdx.x)].b;
    }
  }
  return total;
}

__device__ inline void store_column(int64_t C, int lanes, int V, const Sums& total,
                                    Sums* partials) {
  const int64_t c = int64_t(blockIdx.x) * lanes * V + threadIdx.x;
  if (int(threadIdx.x) < lanes * V && c < C) partials[c * gridDim.y + blockIdx.y] = total;
}

template <int V, class T>
__global__ void partial_moments_rows_vec(int64_t M, int64_t C, int64_t chunk, int lanes, const T* x,
                                         Sums* partials) {
  const VecTile<V> t(M, C, chunk, lanes);
  const int step = kThreads / lanes;
  Sums sums[V] = {};
#pragma unroll 4  // several 16-byte loads in flight per thread; the adds keep their order
  for (int64_t r = t.r0 + t.row; r < t.r1; r += step) {
    float v[V];
    load_floats<V>(x, r * C + t.c0, v);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      sums[i].a += double(v[i]);
      sums[i].b += double(v[i]) * double(v[i]);
    }
  }
  store_column(C, lanes, V, vec_column_sum<V>(sums, lanes), partials);
}

// Sums of g and g * (x - mean) in one pass over x and the gradient.
template <int V, class T, class Grad>
__global__ void partial_grad_sums_rows_vec(int64_t M, int64_t C, int64_t chunk, int lanes,
                                           const T* x, Grad grad, const float* save_mean,
                                           Sums* partials) {
  const VecTile<V> t(M, C, chunk, lanes);
  const int step = kThreads / lanes;
  Sums sums[V] = {};
  if (t.c0 < C) {
    float mean[V];
#pragma unroll
    for (int i = 0; i < V; ++i) mean[i] = save_mean[t.c0 + i];
    const auto g = grad.template channels<V>(t.c0);
#pragma unroll 4
    for (int64_t r = t.r0 + t.row; r < t.r1; r += step) {
      const int64_t j = r * C + t.c0;
      float v[V], gj[V];
      load_floats<V>(x, j, v);
      g(j, v, gj);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        sums[i].a += double(gj[i]);
        sums[i].b += double(gj[i]) * double(v[i] - mean[i]);
      }
    }
  }
  store_column(C, lanes, V, vec_column_sum<V>(sums, lanes), partials);
}

// z = (x - mean[c]) * gamma[c] * invstd[c] + beta[c], V channels of a row per step (the
// expression of normalize_rows, element by element).
template <int V, class Index, class T, class Store>
__global__ void normalize_rows_vec(Index vectors, Index C, const T* x, const float* gamma,
                                   const float* beta, const float* mean, const float* invstd,
                                   Store store) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < vectors;
       e += Index(gridDim.x) * kThreads) {
    const Index j = e * V, c0 = j % C;
    float v[V], z[V];
    load_floats<V>(x, j, v);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const Index c = c0 + i;
      const float scale = (gamma ? gamma[c] : 1.0f) * invstd[c];
      z[i] = normalized(v[i], mean[c], scale, beta ? beta[c] : 0.0f);
    }
    store.vec(int64_t(j), v, z);
  }
}

template <int V, class Index, class T, class Grad>
__global__ void backward_apply_rows_vec(Index vectors, Index C, const T* x, Grad grad,
                                        const float* mean, const float3* coef, T* dx) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < vectors;
       e += Index(gridDim.x) * kThreads) {
    const Index j = e * V, c0 = j % C;
    float v[V], g[V], out[V];
    load_floats<V>(x, j, v);
    grad.template channels<V>(c0)(int64_t(j), v, g);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float3 k3 = coef[c0 + i];
      out[i] = k3.x * (g[i] - k3.y - (v[i] - mean[c0 + i]) * k3.z);
    }
    store_floats<V>(dx, int64_t(j), out);
  }
}

template <class T>
bool rows_vectorizable(const BatchNormShape& s, const T* x) {
  return s.C % kPerVector<T> == 0 && aligned16(x);
}

// split_rows_vec's training forward (S == 1): statistics, then store(j, x, z) for every element.
template <class T, class Store>
void forward_training_rows_vec(const BatchNormShape& s, const T* x, const float* gamma,
                               const float* beta, const TrainingOutputs& out, Store store,
                               void* workspace, gpu::Stream stream, const char* op) {
  constexpr int V = kPerVector<T>;
  if (!rows_vectorizable(s, x) || !store.vectorizable()) {
    forward_training_rows(s, x, gamma, beta, out, store, workspace, stream, op);
    return;
  }
  const int64_t M = s.N, C = s.C, total = M * C;
  const int lanes = vec_lanes(C, V), chunks = vec_chunk_count(M, lanes);
  Sums* partials = static_cast<Sums*>(workspace);
  const dim3 grid(unsigned(ceil_div(C, int64_t(lanes) * V)), unsigned(chunks));
  partial_moments_rows_vec<V>
      <<<grid, kThreads, 0, stream>>>(M, C, vec_chunk_length(M, lanes), lanes, x, partials);
  gpu::check_launch(op);
  finish_moments_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(C, double(M), chunks,
                                                                              partials, out);
  gpu::check_launch(op);
  const int blocks = blocks_for(total / V, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    normalize_rows_vec<V, unsigned><<<blocks, kThreads, 0, stream>>>(
        unsigned(total / V), unsigned(C), x, gamma, beta, out.save_mean, out.save_invstd, store);
  } else {
    normalize_rows_vec<V, int64_t><<<blocks, kThreads, 0, stream>>>(
        total / V, C, x, gamma, beta, out.save_mean, out.save_invstd, store);
  }
  gpu::check_launch(op);
}

// split_rows_vec's backward (S == 1): `first` gives the gradient at z to the sums (and may store
// dr), `second` to dx.
template <class T, class First, class Second>
void backward_rows_vec(const BatchNormShape& s, const T* x, const BackwardOutputs& out,
                       bool have_sums, First first, Second second, T* dx, void* workspace,
                       gpu::Stream stream, const char* op) {
  constexpr int V = kPerVector<T>;
  if (!rows_vectorizable(s, x) || !aligned16(dx) || !first.vectorizable() ||
      !second.vectorizable()) {
    backward_rows(s, x, out, have_sums, first, second, dx, workspace, stream, op);
    return;
  }
  const int64_t M = s.N, C = s.C, total = M * C;
  const int lanes = vec_lanes(C, V), chunks = vec_chunk_count(M, lanes);
  Sums* partials = static_cast<Sums*>(workspace);
  float3* coef = reinterpret_cast<float3*>(partials + C * chunks);
  if (have_sums) {
    const dim3 grid(unsigned(ceil_div(C, int64_t(lanes) * V)), unsigned(chunks));
    partial_grad_sums_rows_vec<V><<<grid, kThreads, 0, stream>>>(
        M, C, vec_chunk_length(M, lanes), lanes, x, first, out.save_mean, partials);
    gpu::check_launch(op);
  }
  finish_grad_sums_rows<<<unsigned(ceil_div(C, kWarps)), kThreads, 0, stream>>>(
      C, double(M), chunks, partials, have_sums, out, coef);
  gpu::check_launch(op);
  if (!dx) return;
  const int blocks = blocks_for(total / V, kThreads, 4096);
  if (total <= (int64_t(1) << 30)) {
    backward_apply_rows_vec<V, unsigned><<<blocks, kThreads, 0, stream>>>(
        unsigned(total / V), unsigned(C), x, second, out.save_mean, coef, dx);
  } else {
    backward_apply_rows_vec<V, int64_t>
        <<<blocks, kThreads, 0, stream>>>(total / V, C, x, second, out.save_mean, coef, dx);
  }
  gpu::check_launch(op);
}

}  // namespace
}  // namespace crema::kernels::cuda
