// rows_tiled's tile (batch_norm_rows_tiled_cuda.cuh has its kernels and launchers): the tiling
// of a row into threads, each on a fixed group of V channels; kernel 1's chunks and its column
// sums over a tile's rows (a warp's shuffles where lanes divides 32, else a pairwise tree through
// shared memory); and the row walk of every rows_tiled kernel, which keeps several rows' loads in
// flight before it stores (pipelined_rows). Included by batch_norm_rows_tiled_cuda.cuh only.
#pragma once

#include "kernels/batch_norm/batch_norm_rows_vec_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// Rows whose loads a thread keeps in flight (pipelined_rows), for rows of kLoads 16-byte loads
// (x and the policy's: Store::kLoads, Grad::kLoads): 3 where that is 2 bf16 / f16 vectors or
// fewer (a ring of at most 24 registers), else 2 -- f32 runs near the copy rate with 2, and a
// deeper ring would cost those kernels a block an SM (registers: MEASUREMENTS.md).
template <class T, int kLoads>
constexpr int kRowsInFlight = sizeof(T) == 2 && kLoads <= 2 ? 3 : 2;

// Shared memory for kernel 1's column sums (Sums: 16 KB): the warps' totals of up to
// kColumnCells / (kWarps * lanes) of the V channels at a time, or the pairwise tree's kThreads.
constexpr int kColumnCells = 1024;

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

// Blocks along the rows for the elementwise kernels: 8 rows per thread, within
// the grid's y limit (beyond, threads walk more rows).
inline unsigned elementwise_row_blocks(int64_t M, const RowTiling& t) {
  const int64_t blocks = ceil_div(M, int64_t(t.rows) * 8);
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
__device__ void tiled_column_sums(Sums (&v)[V], int lanes, int rows, Sums* cells) {
  if (rows == 1) return;  // a tile one row deep: each thread holds its column's sums
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

// Where lanes divides 32, a warp holds 32 / lanes whole rows of the tile: it adds them with a
// butterfly of shuffles (lane ^ lanes, ^ 2 lanes, ...: a fixed tree, and both ends of each
// exchange add the same two numbers, so every lane gets the same bits), then the warps' totals go
// through shared memory, `per` of the V channels a round, and thread k adds column k's kWarps
// totals in warp order and stores its partial. 2 barriers a round (1 to 2 rounds) where the tree
// takes V * (2 + log2(rows)).
template <int V>
__device__ void warp_column_partials(Sums (&v)[V], int lanes, Sums* cells, Sums* partials) {
  const int warp = int(threadIdx.x) / 32, in_warp = int(threadIdx.x) % 32;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    for (int offset = lanes; offset < 32; offset *= 2) {
      v[i].a += __shfl_xor_sync(kFullMask, v[i].a, offset);
      v[i].b += __shfl_xor_sync(kFullMask, v[i].b, offset);
    }
  }
  const int fit = kColumnCells / (kWarps * lanes), per = fit < V ? fit : V;  // per divides V
  const int width = lanes * per, k = int(threadIdx.x);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int slot = i % per;
    if (in_warp < lanes) cells[warp * width + in_warp * per + slot] = v[i];
    if (slot != per - 1) continue;  // the same in every thread: the barriers are the block's
    __syncthreads();
    if (k < width) {
      Sums total = cells[k];
      for (int w = 1; w < kWarps; ++w) {
        total.a += cells[w * width + k].a;
        total.b += cells[w * width + k].b;
      }
      const int64_t c = (int64_t(blockIdx.x) * lanes + k / per) * V + (i - slot) + k % per;
      partials[c * gridDim.y + blockIdx.y] = total;
    }
    __syncthreads();  // the cells are rewritten by the next round
  }
}

// Stores the block's chunk partials of its columns: the sums over the tile's rows of every
// thread's v[i]. Every thread must call it.
template <int V>
__device__ void store_tiled_partials(const TiledThread<V>& t, Sums (&v)[V], int lanes, int rows,
                                     Sums* partials) {
  __shared__ Sums cells[kColumnCells];
  if (32 % lanes == 0) {
    warp_column_partials<V>(v, lanes, cells, partials);
    return;
  }
  tiled_column_sums<V>(v, lanes, rows, cells);
  if (t.row != 0 || !t.active) return;
#pragma unroll
  for (int i = 0; i < V; ++i) partials[(t.c0 + i) * gridDim.y + blockIdx.y] = v[i];
}

// Walks this thread's rows with kSlots rows' loads in flight: the thread's first element
// j = first (row * C + c0), then j + stride, ... while j < end (end = last row + 1 times C: the
// same test as row < last row + 1, as c0 < C). `fetch(j)` issues a row's loads and returns them
// packed, `use(j, loads)` computes and stores. Each row's loads are issued before the stores of
// the kSlots - 1 rows before it: different rows never alias (a caller in place has y == x,
// dx == dy or dr == dy exactly), and a row's own loads precede its stores. The ring is unrolled
// so that no slot is ever copied (a copy would wait for its load).
template <int kSlots, class Loads, class Fetch, class Use>
__device__ void pipelined_rows(int64_t first, int64_t stride, int64_t end, const Fetch& fetch,
                               const Use& use) {
  Loads ring[kSlots];
#pragma unroll
  for (int k = 0; k + 1 < kSlots; ++k) {
    if (first + k * stride < end) ring[k] = fetch(first + k * stride);
  }
  for (int64_t base = first; base < end; base += kSlots * stride) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t j = base + k * stride, ahead = j + (kSlots - 1) * stride;
      if (j >= end) return;
      // slot k - 1 was used by the previous row
      if (ahead < end) ring[(k + kSlots - 1) % kSlots] = fetch(ahead);
      use(j, ring[k]);
    }
  }
}

// A row's loads: this thread's V elements of x and what the policy reads beside them.
template <class T, int V, class More>
struct RowLoads {
  Packed<T, V> x;
  More more;
};

// This thread's first row and the distance to its next: the blocks along y take turns at steps of
// `rows` rows, so the thread's channels never change.
struct RowWalk {
  int64_t first, stride;
  __device__ RowWalk(int row, int rows) {
    first = int64_t(blockIdx.y) * rows + row;
    stride = int64_t(gridDim.y) * rows;
  }
};

}  // namespace
}  // namespace crema::kernels::cuda
