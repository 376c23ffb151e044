// The 16-bit tensor-core convolutions' GEMM (convolution_tc.h): C[m][n] = sum over the inner index
// kk of A(m, kk) * B(n, kk), fp32 sums, where a pass's loaders (convolution_tc_loaders.cuh) say
// where A's and B's elements live and its `store` finishes each output.
//
// A block of 256 threads (8 warps) computes a BM x BN tile of C over slabs of kBK = 32 inner
// indices, kStages = 4 slabs in flight: while slab t is multiplied, the cp.async copies of slabs
// t+1 .. t+3 travel (one commit group per slab; cp.async.wait_group kStages-2 before a slab is
// used, then one __syncthreads, after which the stage read last time is free to refill).
//
// Shared tiles hold the raw 16-bit elements in one of two forms, each swizzled so that both the
// 16-byte copies in and the ldmatrix reads out touch every bank once per 8 rows:
//   k inner [rows][32]   (forward and data: 8 channels of one tap are 16 contiguous bytes)
//            a row is 64 bytes = 4 chunks of 8 elements; chunk c of row r is stored at chunk
//            c ^ ((r / 2) % 4). Rows r..r+7 at one chunk: rows 2 apart share a bank half, the
//            XOR moves each pair to its own 16-byte column: 8 x 16 bytes over all 32 banks.
//   k outer [32][cols]   (filter: the inner index N*P*Q is both tensors' outer index, so 8
//            channels of one output position are contiguous); a row is cols/8 >= 8 chunks, chunk
//            c of row k stored at c ^ (k % 8): 8 consecutive k at one chunk, 8 different banks.
// Fragments of mma.sync.m16n8k16 (PTX ISA; g = lane / 4, t = lane % 4; A(m, k), B(k, n)):
//   a0 = A(g, 2t..2t+1), a1 = A(g+8, 2t..), a2 = A(g, 2t+8..), a3 = A(g+8, 2t+8..);
//   b0 = B(2t..2t+1, g), b1 = B(2t+8.., g);  c = (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
// ldmatrix.x4 loads four 8x8 matrices, lanes 8q..8q+7 giving matrix q's row addresses, and hands
// thread i row i/4, elements 2(i%4), +1 of each: from a k-inner tile that is exactly a0..a3 (rows
// m, 8 k each) and b0, b1 of two n-tiles; from a k-outer tile (rows k) the .trans form gives the
// same fragments.
// Each output is summed by one thread in k order: deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::tc {

constexpr int kThreads = 256, kBK = 32, kStages = 4;

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // one warp's piece
  static constexpr int MT = WM / 16, NT = WN / 8;             // its mma tiles
  static constexpr int STAGE_ELEMS = (BM + BN) * kBK;
  static constexpr int SMEM_BYTES = kStages * STAGE_ELEMS * 2;
  static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");
  static_assert(MT * 16 == WM && NT % 2 == 0 && NT * 8 == WN, "ldmatrix.x4 loads 2 n-tiles");
  static_assert(BM >= 64 && BN >= 64, "k-outer rows of at least 8 chunks");
};
using Wide = Tile<128, 128, 2, 4>;   // GEMM columns > 64; a warp: 64 x 32
using Narrow = Tile<128, 64, 4, 2>;  // at most 64; a warp: 32 x 32

// Element offsets of chunk `chunk` (8 elements) of row `row` in the two tile forms.
__device__ __forceinline__ int inner_offset(int row, int chunk) {
  return row * kBK + ((chunk ^ ((row >> 1) & 3)) << 3);
}
template <int COLS>
__device__ __forceinline__ int outer_offset(int k, int chunk) {
  return k * COLS + ((chunk ^ (k & 7)) << 3);
}

// The two element types: their mma, their rounding (to nearest even) and widening.
struct Bf16 {
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    detail::mma_bf16(d, a, b);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return detail::to_bf16x2(lo, hi);
  }
  static __device__ __forceinline__ float widen(uint16_t bits) {
    return __uint_as_float(uint32_t(bits) << 16);
  }
};
struct F16 {
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
  static __device__ __forceinline__ float widen(uint16_t bits) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
  }
};

// One value rounded to the type: the low half of a rounded pair.
template <class E>
__device__ __forceinline__ uint16_t round_to(float v) {
  return uint16_t(E::pack(v, 0.0f) & 0xffffu);
}

template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* p) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(p));
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
}

// The same non-transposed loads from a shared-memory byte address (each lane naming its own row:
// the few-channel kernels' windows), four matrices or two (lanes 0-15's addresses).
__device__ __forceinline__ void ldmatrix_x4_at(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
// The transposed four (the stem filter kernel's dy, [k][m] stored, read as A).
__device__ __forceinline__ void ldmatrix_x4_trans_at(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x2_at(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(address));
}

// The B fragments of NT n-tiles (8 rows of the [n][k] tile each, `pitch` bytes apart) for one
// 32-byte k step: ldmatrix.x4 by pairs of n-tiles, .x2 for an odd last one. `lane_address`: the
// first n-tile's row for this lane -- lanes 0-7 rows 0-7 at the step's first 16 bytes, 8-15 the
// same rows 16 bytes on, 16-31 rows 8-15 likewise.
template <int NT>
__device__ __forceinline__ void load_b_fragments(uint32_t (&fb)[NT][2], uint32_t lane_address,
                                                 uint32_t pitch) {
#pragma unroll
  for (int j = 0; j + 1 < NT; j += 2) {
    uint32_t b[4];
    ldmatrix_x4_at(b, lane_address + uint32_t(j * 8) * pitch);
    fb[j][0] = b[0], fb[j][1] = b[1], fb[j + 1][0] = b[2], fb[j + 1][1] = b[3];
  }
  if constexpr (NT % 2 == 1)
    ldmatrix_x2_at(fb[NT - 1], lane_address + uint32_t(NT - 1) * 8 * pitch);
}

template <class T>
struct Acc {
  float v[T::MT][T::NT][4];
};

// acc += this warp's share of one slab: sa, sb k-inner ([BM][kBK], [BN][kBK]) or, K_OUTER,
// k-outer ([kBK][BM], [kBK][BN]) tiles.
template <class T, class E, bool K_OUTER>
__device__ __forceinline__ void multiply(const uint16_t* sa, const uint16_t* sb, Acc<T>& acc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane / 8;
  const int wm = (warp / T::WARPS_N) * T::WM, wn = (warp % T::WARPS_N) * T::WN;
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    uint32_t fa[T::MT][4], fb[T::NT][2];
#pragma unroll
    for (int i = 0; i < T::MT; ++i) {
      // Matrix q: rows (m) +8 for q = 1, 3; k +8 for q = 2, 3.
      const int m = wm + i * 16 + (q % 2) * 8, k = ks * 16 + (q / 2) * 8;
      if constexpr (K_OUTER) {
        ldmatrix_x4<true>(fa[i], sa + outer_offset<T::BM>(k + lane % 8, m / 8));
      } else {
        ldmatrix_x4<false>(fa[i], sa + inner_offset(m + lane % 8, k / 8));
      }
    }
#pragma unroll
    for (int j = 0; j < T::NT / 2; ++j) {
      // Matrix q: k +8 for q = 1, 3 (b1); columns (n) +8 for q = 2, 3 (the second n-tile).
      const int n = wn + j * 16 + (q / 2) * 8, k = ks * 16 + (q % 2) * 8;
      uint32_t r[4];
      if constexpr (K_OUTER) {
        ldmatrix_x4<true>(r, sb + outer_offset<T::BN>(k + lane % 8, n / 8));
      } else {
        ldmatrix_x4<false>(r, sb + inner_offset(n + lane % 8, k / 8));
      }
      fb[2 * j][0] = r[0], fb[2 * j][1] = r[1], fb[2 * j + 1][0] = r[2], fb[2 * j + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < T::MT; ++i) {
#pragma unroll
      for (int j = 0; j < T::NT; ++j) E::mma(acc.v[i][j], fa[i], fb[j]);
    }
  }
}

// The block's GEMM. `Problem` provides, for block index z (group, and slice of the inner range):
//   k_range(z, begin, end); M; make_a(m0, z, k_end) and make_b(n0, z, k_end), loaders whose
//   load(uint16_t* tile, int k0) fills slab k0 of the block's rows m0.. or n0.. (zero outside);
//   store(z, m, n, v0, v1) for m < M: columns n and n + 1 (n even; the store checks N), returning
//   the two values as stored; kKOuter, whether its loaders fill k-outer tiles; kStats, whether
//   the kernel also sums each column's stored values and their squares over each warp's rows
//   (in a fixed order) and hands them to store_stats(row, z, n, sum, squares), row = the
//   warp's row of the grid (blockIdx.x * WARPS_M + its row of warps), n < N unchecked.
template <class T, class E, class Problem>
__global__ void __launch_bounds__(kThreads, 2) conv_tc_kernel(const Problem prob) {
  extern __shared__ uint4 shared16[];
  uint16_t* smem = reinterpret_cast<uint16_t*>(shared16);
  const int m0 = blockIdx.x * T::BM, n0 = blockIdx.y * T::BN, z = blockIdx.z;
  int k_begin, k_end;
  prob.k_range(z, k_begin, k_end);
  const auto load_a = prob.make_a(m0, z, k_end);
  const auto load_b = prob.make_b(n0, z, k_end);
  const int slabs = (k_end - k_begin + kBK - 1) / kBK;
  auto stage_a = [&](int s) { return smem + s * T::STAGE_ELEMS; };
  auto stage_b = [&](int s) { return smem + s * T::STAGE_ELEMS + T::BM * kBK; };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) {
      load_a.load(stage_a(s), k_begin + s * kBK);
      load_b.load(stage_b(s), k_begin + s * kBK);
    }
    detail::cp_async_commit();
  }
  Acc<T> acc = {};
  for (int slab = 0; slab < slabs; ++slab) {
    detail::cp_async_wait<kStages - 2>();
    __syncthreads();  // slab `slab` has landed for every thread; slab - 1's stage is free
    const int next = slab + kStages - 1;
    if (next < slabs) {
      load_a.load(stage_a(next % kStages), k_begin + next * kBK);
      load_b.load(stage_b(next % kStages), k_begin + next * kBK);
    }
    detail::cp_async_commit();
    const int s = slab % kStages;
    multiply<T, E, Problem::kKOuter>(stage_a(s), stage_b(s), acc);
  }
  detail::cp_async_wait<0>();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = m0 + (warp / T::WARPS_N) * T::WM, wn = n0 + (warp % T::WARPS_N) * T::WN;
  float sum[T::NT][2] = {}, squares[T::NT][2] = {};  // kStats: this thread's columns, its rows
#pragma unroll
  for (int i = 0; i < T::MT; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = wm + i * 16 + g + 8 * half;
      if (m >= prob.M) continue;
#pragma unroll
      for (int j = 0; j < T::NT; ++j) {
        const float2 out =
            prob.store(z, m, wn + j * 8 + 2 * t, acc.v[i][j][2 * half], acc.v[i][j][2 * half + 1]);
        if constexpr (Problem::kStats) {
          sum[j][0] += out.x, sum[j][1] += out.y;
          squares[j][0] += out.x * out.x, squares[j][1] += out.y * out.y;
        }
      }
    }
  }
  if constexpr (Problem::kStats) {
    // The 8 lanes of one t hold the warp's rows of the same columns: a fixed butterfly sums them.
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
#pragma unroll
        for (int mask = 4; mask < 32; mask *= 2) {
          sum[j][e] += __shfl_xor_sync(0xffffffffu, sum[j][e], mask);
          squares[j][e] += __shfl_xor_sync(0xffffffffu, squares[j][e], mask);
        }
        const int row = blockIdx.x * T::WARPS_M + warp / T::WARPS_N;
        if (g == 0) prob.store_stats(row, z, wn + j * 8 + 2 * t + e, sum[j][e], squares[j][e]);
      }
    }
  }
}

// Lets the kernel use its dynamic shared memory and launches one block per (BM rows, BN columns,
// z) of the GEMM.
template <class T, class E, class Problem>
void launch(const Problem& prob, int columns, int z, gpu::Stream stream, const char* what) {
  const auto kernel = conv_tc_kernel<T, E, Problem>;
  detail::set_shared_memory_limit(kernel, T::SMEM_BYTES, what);
  const dim3 grid(unsigned((prob.M + T::BM - 1) / T::BM), unsigned((columns + T::BN - 1) / T::BN),
                  unsigned(z));
  kernel<<<grid, kThreads, T::SMEM_BYTES, stream>>>(prob);
  gpu::check_launch(what);
}

}  // namespace crema::kernels::cuda::tc
