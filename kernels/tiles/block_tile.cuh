// The block-tiled, register-blocked GEMM main loop that crema's CUDA SGEMM (gemm_cuda.cu) and
// its implicit-GEMM convolutions (kernels/convolution) share. Only the loaders (how a tile of
// op(A) or op(B) is read from global memory) and the store (where C goes) differ between them.
//
// One block computes a BM x BN tile of C = op(A) op(B) over a range of the inner dimension:
//
//   for each BK-wide slab k0 of the inner dimension:
//     shared a[BK][BM] = op(A)[m0 .. m0+BM, k0 .. k0+BK]^T    (k-major: a thread reads its rows as
//     shared b[BK][BN] = op(B)[k0 .. k0+BK, n0 .. n0+BN]        float4s without bank conflicts)
//     acc[TM][TN] += a[k][thread's rows]^T * b[k][thread's columns]     for the thread's k slice
//
// Each thread owns a TM x TN micro-tile of C in registers: per k it loads TM + TN floats from
// shared memory and does TM*TN FMAs. Its rows are VM-wide groups spread over the tile (row
// group g starts at g*THREADS_M*VM), so a quarter-warp reading its float4s covers 128 contiguous
// bytes. The next slab is fetched into registers while the current one is multiplied (one shared
// buffer, global latency hidden behind the FMAs).
//
// Small tiles split the inner dimension inside the block (KSPLIT > 1): the k rows of each slab
// are dealt to KSPLIT groups of threads, each with its own accumulators, and at the end the
// groups' partial tiles are added in group order through shared memory. That keeps 256 threads
// busy on a 32 x 32 tile (a GEMM with 64 rows needs small tiles to occupy 132 SMs) and stays
// deterministic: the order of every sum is fixed by the tile shape alone.
#pragma once

#include <cstdint>

namespace crema::kernels::cuda::tile {

// Shared slabs are [BK][side + kPad]: rows stay 16-byte aligned and successive k rows start in
// different banks.
constexpr int kPad = 4;

template <int BM_, int BN_, int BK_, int TM_, int TN_, int KSPLIT_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile and slab depth
  static constexpr int TM = TM_, TN = TN_;            // micro-tile of one thread
  static constexpr int KSPLIT = KSPLIT_;              // thread groups sharing the slab's k rows
  static constexpr int VM = TM < 4 ? TM : 4, VN = TN < 4 ? TN : 4;  // fragment vector widths
  static constexpr int THREADS_M = BM / TM, THREADS_N = BN / TN;
  static constexpr int SLICE_THREADS = THREADS_M * THREADS_N;
  static constexpr int THREADS = SLICE_THREADS * KSPLIT;
  static constexpr int SLICE_K = BK / KSPLIT;
  static_assert(BM % TM == 0 && BN % TN == 0 && BK % KSPLIT == 0, "tiles must divide");
  static_assert(TM % VM == 0 && TN % VN == 0 && (VM == 2 || VM == 4) && (VN == 2 || VN == 4),
                "micro-tiles are made of float2 or float4 groups");
  static_assert(BM % 4 == 0 && BN % 4 == 0 && BK % 4 == 0, "loaders move float4s");
};

// The tile shapes crema uses (all 256 threads). Large and Medium for big GEMMs; Small and Tiny
// split k four ways to give GEMMs with few tiles enough threads per SM.
using Large = Config<128, 128, 8, 8, 8, 1>;
using Medium = Config<64, 64, 16, 4, 4, 1>;
using Small = Config<32, 32, 32, 4, 4, 4>;
using Tiny = Config<16, 16, 32, 2, 2, 4>;

// Host side: the choice of tile. tile_cost estimates a shape's time as the padded area of C that
// each block running at once must cover (blocks share the machine; about one per SM of an
// H100/H200, 132 SMs, is counted as running at once), times a penalty for the smaller tiles'
// lower FMA-to-load ratio and the k split's reduction. Rough, and a function of the problem's
// shape only: the choice, hence the order of every sum, never depends on the device.
enum class TileShape { large, medium, small, tiny };

struct TileInfo {
  int bm, bn, bk;
  double penalty;
};

inline TileInfo tile_info(TileShape shape) {
  switch (shape) {
    case TileShape::large:
      return {Large::BM, Large::BN, Large::BK, 1.0};
    case TileShape::medium:
      return {Medium::BM, Medium::BN, Medium::BK, 1.3};
    case TileShape::small:
      return {Small::BM, Small::BN, Small::BK, 1.6};
    case TileShape::tiny:
      break;
  }
  return {Tiny::BM, Tiny::BN, Tiny::BK, 3.0};
}

// `copies` independent M x N results (a convolution's groups); copies = 0 means as many as it
// takes to fill the machine (a split inner dimension), so that only padding and penalty count.
inline double tile_cost(TileShape shape, int64_t M, int64_t N, int64_t copies) {
  constexpr int64_t kBusyBlocks = 132;
  const TileInfo t = tile_info(shape);
  const int64_t tiles = (M + t.bm - 1) / t.bm * ((N + t.bn - 1) / t.bn);
  const int64_t blocks = copies == 0 ? tiles * kBusyBlocks : tiles * copies;
  const double busy = double(blocks < kBusyBlocks ? blocks : kBusyBlocks);
  return double(blocks) * t.bm * t.bn / busy * t.penalty;
}

// The cheapest shape from `large` down to `smallest` (ties go to the larger tile).
inline TileShape choose_tile(int64_t M, int64_t N, int64_t copies, TileShape smallest) {
  TileShape best = TileShape::large;
  for (int s = int(TileShape::medium); s <= int(smallest); ++s) {
    const TileShape shape = TileShape(s);
    if (tile_cost(shape, M, N, copies) < tile_cost(best, M, N, copies)) best = shape;
  }
  return best;
}

// Shared memory of one block: the two slabs while multiplying, the k groups' partial tiles at
// the end (KSPLIT > 1 only; otherwise a placeholder).
template <class Cfg>
union alignas(16) SharedStorage {
  struct {
    float a[Cfg::BK][Cfg::BM + kPad];  // op(A) slab, k-major
    float b[Cfg::BK][Cfg::BN + kPad];  // op(B) slab
  } tiles;
  float partial[Cfg::KSPLIT][Cfg::KSPLIT > 1 ? Cfg::BM : 1][Cfg::KSPLIT > 1 ? Cfg::BN : 1];
};

// Where one thread's micro-tile lies in the block tile.
template <class Cfg>
struct ThreadTile {
  int tid, slice, ty, tx;  // thread in the block; k group; row and column in its group
  __device__ explicit ThreadTile(int thread)
      : tid(thread),
        slice(thread / Cfg::SLICE_THREADS),
        ty(thread % Cfg::SLICE_THREADS / Cfg::THREADS_N),
        tx(thread % Cfg::THREADS_N) {}
  // Row of acc[i][.] and column of acc[.][j] within the block tile.
  __device__ int row(int i) const {
    return i / Cfg::VM * (Cfg::THREADS_M * Cfg::VM) + ty * Cfg::VM + i % Cfg::VM;
  }
  __device__ int col(int j) const {
    return j / Cfg::VN * (Cfg::THREADS_N * Cfg::VN) + tx * Cfg::VN + j % Cfg::VN;
  }
};

// out[0 .. COUNT) = the thread's COUNT entries of one k row of a slab, V at a time.
template <int COUNT, int V, int THREADS_ALONG>
__device__ __forceinline__ void load_fragment(const float* slab_row, int t, float (&out)[COUNT]) {
#pragma unroll
  for (int g = 0; g < COUNT / V; ++g) {
    const float* p = slab_row + g * (THREADS_ALONG * V) + t * V;
    if constexpr (V == 4) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      out[4 * g] = v.x, out[4 * g + 1] = v.y, out[4 * g + 2] = v.z, out[4 * g + 3] = v.w;
    } else {
      const float2 v = *reinterpret_cast<const float2*>(p);
      out[2 * g] = v.x, out[2 * g + 1] = v.y;
    }
  }
}

// acc += the thread's part of a[k]^T b[k] for the k rows of its slice of the slab.
template <class Cfg>
__device__ __forceinline__ void multiply_slab(const SharedStorage<Cfg>& sm,
                                              const ThreadTile<Cfg>& t,
                                              float (&acc)[Cfg::TM][Cfg::TN]) {
#pragma unroll
  for (int kk = 0; kk < Cfg::SLICE_K; ++kk) {
    const int k = t.slice * Cfg::SLICE_K + kk;
    float a[Cfg::TM], b[Cfg::TN];
    load_fragment<Cfg::TM, Cfg::VM, Cfg::THREADS_M>(sm.tiles.a[k], t.ty, a);
    load_fragment<Cfg::TN, Cfg::VN, Cfg::THREADS_N>(sm.tiles.b[k], t.tx, b);
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
#pragma unroll
      for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }
}

// The slab pipeline of every block-tiled loop (this file's FFMA loop, the convolutions'
// mma.sync loop in kernels/convolution/convolution_mma.cuh): over inner indices [k_begin, k_end)
// in BK-deep slabs, each slab is stashed into shared memory and multiplied by `multiply()` while
// the next one travels from global memory into registers. k_begin is a multiple of BK. The
// loaders provide fetch(k0) (global -> registers, zeros past the edges) and stash(slab)
// (registers -> shared). Every thread of the block must call this with the same range.
template <class Cfg, class LoadA, class LoadB, class Multiply>
__device__ __forceinline__ void for_each_slab(LoadA& load_a, LoadB& load_b, int k_begin,
                                              int k_end, SharedStorage<Cfg>& sm,
                                              Multiply&& multiply) {
  if (k_begin >= k_end) return;
  load_a.fetch(k_begin);
  load_b.fetch(k_begin);
  for (int k0 = k_begin; k0 < k_end; k0 += Cfg::BK) {
    load_a.stash(sm.tiles.a);
    load_b.stash(sm.tiles.b);
    __syncthreads();
    if (k0 + Cfg::BK < k_end) {  // the next slab travels while this one is multiplied
      load_a.fetch(k0 + Cfg::BK);
      load_b.fetch(k0 + Cfg::BK);
    }
    multiply();
    __syncthreads();
  }
}

// acc += the block's op(A) op(B) over inner indices [k_begin, k_end) (for_each_slab's rules).
template <class Cfg, class LoadA, class LoadB>
__device__ void accumulate(LoadA& load_a, LoadB& load_b, int k_begin, int k_end,
                           SharedStorage<Cfg>& sm, const ThreadTile<Cfg>& t,
                           float (&acc)[Cfg::TM][Cfg::TN]) {
  for_each_slab(load_a, load_b, k_begin, k_end, sm, [&] { multiply_slab(sm, t, acc); });
}

// Hands the block's results to store(m, n, v, count), which writes C[m][n + e] = v[e] for
// e < count (count <= 4; consecutive columns; m < M and n + count <= N guaranteed here). With
// KSPLIT > 1 the k groups' tiles are first added in group order. Every thread must call this.
template <class Cfg, class Store>
__device__ void finish(SharedStorage<Cfg>& sm, const ThreadTile<Cfg>& t,
                       const float (&acc)[Cfg::TM][Cfg::TN], int m0, int n0, int M, int N,
                       Store& store) {
  if constexpr (Cfg::KSPLIT == 1) {
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
      const int m = m0 + t.row(i);
      if (m >= M) continue;
#pragma unroll
      for (int g = 0; g < Cfg::TN / Cfg::VN; ++g) {
        const int n = n0 + t.col(g * Cfg::VN);
        if (n >= N) continue;
        float v[Cfg::VN];
#pragma unroll
        for (int e = 0; e < Cfg::VN; ++e) v[e] = acc[i][g * Cfg::VN + e];
        store(m, n, v, N - n < Cfg::VN ? N - n : Cfg::VN);
      }
    }
  } else {
    // The slabs are no longer needed (accumulate ended on a barrier): reuse their memory.
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
#pragma unroll
      for (int j = 0; j < Cfg::TN; ++j) sm.partial[t.slice][t.row(i)][t.col(j)] = acc[i][j];
    }
    __syncthreads();
    for (int quad = t.tid; quad < Cfg::BM * Cfg::BN / 4; quad += Cfg::THREADS) {
      const int row = quad / (Cfg::BN / 4), col = quad % (Cfg::BN / 4) * 4;
      const int m = m0 + row, n = n0 + col;
      if (m >= M || n >= N) continue;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < Cfg::KSPLIT; ++s) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] += sm.partial[s][row][col + e];
      }
      store(m, n, v, N - n < 4 ? N - n : 4);
    }
  }
}

// Loader of a dense row-major operand: element (o, k) -- o along the tile's outer side (m for
// op(A), n for op(B)), k along the inner dimension -- is p[o*ld + k] when K_CONTIGUOUS, else
// p[k*ld + o]. Reads float4s along the contiguous side when `vec` (p 16-byte aligned, ld a
// multiple of 4) and the 4 elements are inside the matrix; elements past outer_size or k_size
// read as 0 and nothing outside the matrix is touched. Fills a k-major slab [BK][OUTER + kPad].
template <int OUTER, int BK, int THREADS, bool K_CONTIGUOUS>
struct DenseLoader {
  static constexpr int VECTORS = OUTER * BK / 4;
  static constexpr int PER_THREAD = (VECTORS + THREADS - 1) / THREADS;

  const float* p;
  int64_t ld;
  int o0, outer_size, k_size;
  bool vec;
  int tid;
  float4 regs[PER_THREAD];

  // Position (o, k) in the tile of vector t of this thread: 4 consecutive k when K_CONTIGUOUS,
  // else 4 consecutive o.
  __device__ void position(int t, int& o, int& k) const {
    const int v = tid + t * THREADS;
    if constexpr (K_CONTIGUOUS) {
      o = v / (BK / 4), k = v % (BK / 4) * 4;
    } else {
      k = v / (OUTER / 4), o = v % (OUTER / 4) * 4;
    }
  }

  __device__ void fetch(int k0) {
#pragma unroll
    for (int t = 0; t < PER_THREAD; ++t) {
      if (VECTORS % THREADS != 0 && tid + t * THREADS >= VECTORS) break;
      int o, k;
      position(t, o, k);
      o += o0, k += k0;
      const bool line_inside = K_CONTIGUOUS ? o < outer_size : k < k_size;
      const int left = K_CONTIGUOUS ? k_size - k : outer_size - o;  // along the contiguous side
      float4 r = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (line_inside && left > 0) {
        const float* q = K_CONTIGUOUS ? p + o * ld + k : p + k * ld + o;
        if (vec && left >= 4) {
          r = *reinterpret_cast<const float4*>(q);
        } else {
          r.x = q[0];
          if (left > 1) r.y = q[1];
          if (left > 2) r.z = q[2];
          if (left > 3) r.w = q[3];
        }
      }
      regs[t] = r;
    }
  }

  __device__ void stash(float (*slab)[OUTER + kPad]) const {
#pragma unroll
    for (int t = 0; t < PER_THREAD; ++t) {
      if (VECTORS % THREADS != 0 && tid + t * THREADS >= VECTORS) break;
      int o, k;
      position(t, o, k);
      if constexpr (K_CONTIGUOUS) {
        slab[k][o] = regs[t].x, slab[k + 1][o] = regs[t].y;
        slab[k + 2][o] = regs[t].z, slab[k + 3][o] = regs[t].w;
      } else {
        *reinterpret_cast<float4*>(&slab[k][o]) = regs[t];
      }
    }
  }
};

}  // namespace crema::kernels::cuda::tile
