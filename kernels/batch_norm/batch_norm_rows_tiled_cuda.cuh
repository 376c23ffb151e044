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
// Kernel 1 (statistics or gradient sums) runs on the same tile over a chunk of rows (grid: row
// tiles x chunks of 16 rows a thread, at most kMaxChunks: the partials' layout follows the shape
// only, never the GPU); each thread adds its rows in double, then the block adds the threads of a
// column in a fixed tree through 4 KB of shared memory, one channel of the V at a time
// (split_rows_vec's column sum held kThreads * V pairs of doubles: 32 KB). Kernel 2 is split_rows'.
// No atomics: the same bits on every run; the order of the adds differs from split_rows_vec's.
#pragma once

#include "kernels/batch_norm/batch_norm_rows_vec_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// Rows each thread of the elementwise kernels loads before it computes and stores any: their
// 16-byte loads are in flight together (a store between them would order them: y may alias x).
constexpr int kRowsInFlight = 2;

// The tile of a row of C / V vectors: `tiles` tiles of `lanes` vectors (the last one may be
// shorter), `rows` = kThreads / lanes rows a block step.
struct RowTiling {
  int tiles, lanes, rows;
};

inline RowTiling row_tiling(int64_t C, int V) {
  const int64_t vectors = C / V;
  const int tiles = int(ceil_div(vectors, kThreads));
  const int lanes = int(ceil_div(vectors, tiles));
  return {tiles, lanes, kThreads / lanes};
}

// Rows per chunk of kernel 1: 16 rows a thread (a block's 16 steps), or more where that would
// give more than kMaxChunks chunks. Not split_rows' 256-row minimum: at C = 2048 bf16 a block is
// one row wide and [6272, 2048] gets 392 blocks, not 25.
inline int64_t tiled_chunk_length(int64_t M, const RowTiling& t) {
  const int64_t by_limit = ceil_div(M, kMaxChunks), at_least = 16 * int64_t(t.rows);
  return by_limit > at_least ? by_limit : at_least;
}

inline int tiled_chunk_count(int64_t M, const RowTiling& t) {
  const int64_t chunks = ceil_div(M, tiled_chunk_length(M, t));
  return int(chunks < 1 ? 1 : chunks);
}

// rows_tiled's scratch: the partials of either vector width C allows, or of split_rows_vec's
// fallback (split_rows' layout), then the backward's coefficients.
inline size_t rows_tiled_workspace_bytes(const BatchNormShape& s) {
  size_t bytes = rows_workspace_bytes(s);
  for (const int V : {4, 8}) {
    if (s.C % V != 0) continue;
    const size_t tiled =
        size_t(s.C) * size_t(tiled_chunk_count(s.N, row_tiling(s.C, V))) * sizeof(Sums) +
        size_t(s.C) * sizeof(float3);
    if (tiled > bytes) bytes = tiled;
  }
  return bytes;
}

// Blocks along the rows for the elementwise kernels: kRowsInFlight * 4 rows per thread, within
// the grid's y limit (beyond, threads walk more rows).
inline unsigned elementwise_row_blocks(int64_t M, const RowTiling& t) {
  const int64_t blocks = ceil_div(M, int64_t(t.rows) * kRowsInFlight * 4);
  return unsigned(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

// This thread's place in the tile: channels [c0, c0 + V), rows `row`, `row` + rows, ... of the
// block's; `active` false for the threads past the last channel or the last full row of lanes.
template <int V>
struct TiledThread {
  int64_t c0;
  int lane, row;
  bool active;
  __device__ TiledThread(int64_t C, int lanes, int rows) {
    lane = int(threadIdx.x) % lanes;
    row = int(threadIdx.x) / lanes;
    c0 = (int64_t(blockIdx.x) * lanes + lane) * V;
    active = row < rows && c0 < C;
  }
};

// The sum over the block's rows of each active thread's v[i], for the V channels, valid in the
// threads of row 0: a pairwise tree over the rows (fixed by the shape), one channel at a time
// through kThreads cells. Every thread must call it.
template <int V>
__device__ void tiled_column_sums(Sums (&v)[V], int lanes, int rows) {
  __shared__ Sums cells[kThreads];
  const int t = int(threadIdx.x), row = t / lanes;
  int top = 1;  // the smallest power of two >= rows
  while (top < rows) top *= 2;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    cells[t] = v[i];
    __syncthreads();
    for (int half = top / 2; half > 0; half /= 2) {
      if (row < half && row + half < rows) {
        const Sums other = cells[t + half * lanes];
        cells[t].a += other.a;
        cells[t].b += other.b;
      }
      __syncthreads();
    }
    v[i] = cells[t];
    __syncthreads();  // the cells are rewritten for the next channel
  }
}

// Row 0's thread of each column stores its V channels' sums for the block's chunk.
template <int V>
__device__ void store_tiled_partials(const TiledThread<V>& t, const Sums (&v)[V], Sums* partials) {
  if (t.row != 0 || !t.active) return;
#pragma unroll
  for (int i = 0; i < V; ++i) partials[(t.c0 + i) * gridDim.y + blockIdx.y] = v[i];
}

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
  tiled_column_sums<V>(sums, lanes, rows);
  store_tiled_partials<V>(t, sums, partials);
}

// Sums of g and g * (x - mean) in one pass over x and the gradient.
template <int V, class T, class Grad>
__global__ void partial_grad_sums_tiled(int64_t M, int64_t C, int64_t chunk, int lanes, int rows,
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
#pragma unroll 4
    for (int64_t r = r0 + t.row; r < r1; r += rows) {
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
  tiled_column_sums<V>(sums, lanes, rows);
  store_tiled_partials<V>(t, sums, partials);
}

// This thread's first row and the distance to its next: the blocks along y take turns at steps of
// `rows` rows, so the thread's channels never change.
struct RowWalk {
  int64_t first, stride;
  __device__ RowWalk(int row, int rows) {
    first = int64_t(blockIdx.y) * rows + row;
    stride = int64_t(gridDim.y) * rows;
  }
};

// z = (x - mean[c]) * scale[c] + shift[c] for this thread's rows, mean, scale = gamma[c] *
// invstd[c] and shift = beta[c] held in registers (normalize_rows_vec's expression); writes
// store(j, x, z).
template <int V, class T, class Store>
__device__ void normalize_tiled_rows(int64_t M, int64_t C, const TiledThread<V>& t, int rows,
                                     const T* x, const float (&mean)[V], const float (&scale)[V],
                                     const float (&shift)[V], const Store& store) {
  const RowWalk w(t.row, rows);
  for (int64_t r = w.first; r < M; r += w.stride * kRowsInFlight) {
    float v[kRowsInFlight][V];
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (r + k * w.stride < M) load_floats<V>(x, (r + k * w.stride) * C + t.c0, v[k]);
    }
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (r + k * w.stride >= M) break;
      float z[V];
#pragma unroll
      for (int i = 0; i < V; ++i) z[i] = normalized(v[k][i], mean[i], scale[i], shift[i]);
      store.vec((r + k * w.stride) * C + t.c0, v[k], z);
    }
  }
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
// (backward_apply_rows_vec's expression); g from `grad`, all of a step's rows loaded first.
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
  const RowWalk w(t.row, rows);
  for (int64_t r = w.first; r < M; r += w.stride * kRowsInFlight) {
    float v[kRowsInFlight][V], gv[kRowsInFlight][V];
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (r + k * w.stride < M) load_floats<V>(x, (r + k * w.stride) * C + t.c0, v[k]);
    }
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (r + k * w.stride < M) g((r + k * w.stride) * C + t.c0, v[k], gv[k]);
    }
#pragma unroll
    for (int k = 0; k < kRowsInFlight; ++k) {
      if (r + k * w.stride >= M) break;
      float out[V];
#pragma unroll
      for (int i = 0; i < V; ++i) out[i] = a[i] * (gv[k][i] - b[i] - (v[k][i] - m[i]) * d[i]);
      store_floats<V>(dx, (r + k * w.stride) * C + t.c0, out);
    }
  }
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
    partial_grad_sums_tiled<V>
        <<<dim3(unsigned(tiling.tiles), unsigned(chunks)), kThreads, 0, stream>>>(
            M, C, tiled_chunk_length(M, tiling), tiling.lanes, tiling.rows, x, first, out.save_mean,
            partials);
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
