// The NHWC convolutions' GEMM main loop (convolution_nhwc_cuda.cu): C[m][n] = sum over the inner
// index kk of A(m, kk) * B(n, kk), where a pass's loaders say where A's and B's elements live.
// Both operands sit in shared memory "k inner": a tile is [rows][BK + 4] floats, so the channels
// of one (r, s) tap, contiguous in an NHWC tensor and in a KRSC filter, land contiguous in a row
// (one cp.async of 16 bytes per 4 channels) and every fragment is read without a transpose.
//
// A block of 256 threads computes a BM x BN tile of C over slabs of BK = 32 inner indices, with
// STAGES = 3 slabs in flight: while slab t is multiplied, the copies of slabs t+1 and t+2 travel
// (cp.async groups, one commit per slab, cp.async.wait_group STAGES-2 before a slab is used).
// The multiply is, per MATH:
//   fp32  FFMA: thread (tx, ty) of a 16 x 16 grid holds rows ty + 16 i and columns tx + 16 j and
//         reads float4 runs along k (8 threads of a quarter warp hit 8 different 4-bank groups:
//         row stride 36 floats = 4 banks);
//   tf32  mma.sync m16n8k8, bf16 m16n8k16 (fp32 accumulation); warps tile the block WARPS_M x
//         WARPS_N; fragment elements are rounded on the way (cvt.rna.tf32, cvt.rn.bf16x2).
//         Fragment layouts (PTX ISA), g = lane / 4, t = lane % 4; A(row, k), B(k, n):
//           tf32 a = (g, t), (g+8, t), (g, t+4), (g+8, t+4); b = (t, g), (t+4, g)
//           bf16 a = (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); b = (2t.., g),
//                (2t+8.., g);  c = (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
//         With rows 36 floats apart, (g, t) reads hit 32 different banks.
// The filter gradient's inner index (n, p, q) is the outer index of both NHWC operands; its
// 16-byte loaders fill "k outer" tiles instead, [BK][rows + 4] (kKOuter), where 4 channels of one
// output position are contiguous, and the multiply reads them as conv_mma.cuh does (FFMA: thread
// (tx, ty) holds rows 4 ty + 64 i .. + 3 and columns 4 tx + 64 j .. + 3, float4 along the rows;
// mma: rows 4 apart (132 floats = 4 banks), again 32 different banks).
// Each output is summed by one thread in k order: deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm/gemm.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::nhwc {

constexpr int kThreads = 256, kBK = 32, kStages = 3, kLds = kBK + 4;

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // one warp's piece (mma)
  static constexpr int MT = WM / 16, NT = WN / 8;             // its mma tiles
  static constexpr int FM = BM / 16, FN = BN / 16;            // one thread's outputs (FFMA)
  static constexpr int STAGE_FLOATS = (BM + BN) * kLds;
  static constexpr int SMEM_BYTES = kStages * STAGE_FLOATS * int(sizeof(float));
  static_assert(WARPS_M * WARPS_N * 32 == kThreads, "8 warps");
  static_assert(MT * 16 == WM && NT * 8 == WN && FM * 16 == BM && FN * 16 == BN, "even tiles");
};
using Wide = Tile<128, 128, 2, 4>;   // GEMM columns (output channels) > 64
using Narrow = Tile<128, 64, 4, 2>;  // 17 to 64
using Thin = Tile<128, 16, 8, 1>;    // at most 16 (backward data of a 3-channel input)

// The accumulators of one thread: MT x NT x 4 (mma) or FM x FN (FFMA), the same count.
template <class T>
struct Acc {
  float v[T::MT * T::NT * 4];
};

template <class T>
__device__ __forceinline__ void multiply_ffma(const float* sa, const float* sb, Acc<T>& acc) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int k = 0; k < kBK; k += 4) {
    float4 a[T::FM];
#pragma unroll
    for (int i = 0; i < T::FM; ++i) {
      a[i] = *reinterpret_cast<const float4*>(sa + (ty + 16 * i) * kLds + k);
    }
#pragma unroll
    for (int j = 0; j < T::FN; ++j) {  // one column's float4 at a time: fewer live registers
      const float4 b = *reinterpret_cast<const float4*>(sb + (tx + 16 * j) * kLds + k);
#pragma unroll
      for (int i = 0; i < T::FM; ++i) {
        float& c = acc.v[i * T::FN + j];
        c = fmaf(a[i].x, b.x, c);
        c = fmaf(a[i].y, b.y, c);
        c = fmaf(a[i].z, b.z, c);
        c = fmaf(a[i].w, b.w, c);
      }
    }
  }
}

// The same products from k-outer tiles sa [kBK][BM + 4], sb [kBK][BN + 4] (FM, FN multiples of 4).
template <class T>
__device__ __forceinline__ void multiply_ffma_outer(const float* sa, const float* sb, Acc<T>& acc) {
  constexpr int LA = T::BM + 4, LB = T::BN + 4;
  static_assert(T::FM % 4 == 0 && T::FN % 4 == 0, "float4 runs of rows and columns");
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
  for (int k = 0; k < kBK; ++k) {
    float a[T::FM], b[T::FN];
#pragma unroll
    for (int i = 0; i < T::FM / 4; ++i) {
      *reinterpret_cast<float4*>(&a[4 * i]) =
          *reinterpret_cast<const float4*>(sa + k * LA + 4 * ty + 64 * i);
    }
#pragma unroll
    for (int j = 0; j < T::FN / 4; ++j) {
      *reinterpret_cast<float4*>(&b[4 * j]) =
          *reinterpret_cast<const float4*>(sb + k * LB + 4 * tx + 64 * j);
    }
#pragma unroll
    for (int i = 0; i < T::FM; ++i) {
#pragma unroll
      for (int j = 0; j < T::FN; ++j) acc.v[i * T::FN + j] = fmaf(a[i], b[j], acc.v[i * T::FN + j]);
    }
  }
}

// acc += every (row tile, column tile) product of one k step's fragments.
template <class T, bool BF16>
__device__ __forceinline__ void mma_tiles(const uint32_t (&fa)[T::MT][4],
                                          const uint32_t (&fb)[T::NT][2], Acc<T>& acc) {
#pragma unroll
  for (int i = 0; i < T::MT; ++i) {
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
      float(&c)[4] = *reinterpret_cast<float(*)[4]>(&acc.v[(i * T::NT + j) * 4]);
      if constexpr (BF16) {
        detail::mma_bf16(c, fa[i], fb[j]);
      } else {
        detail::mma_tf32(c, fa[i], fb[j]);
      }
    }
  }
}

template <class T, bool BF16>
__device__ __forceinline__ void multiply_mma_outer(const float* sa, const float* sb, Acc<T>& acc) {
  constexpr int LA = T::BM + 4, LB = T::BN + 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  sa += (warp / T::WARPS_N) * T::WM;
  sb += (warp % T::WARPS_N) * T::WN;
  constexpr int kStep = BF16 ? 16 : 8;
#pragma unroll
  for (int k = 0; k < kBK; k += kStep) {
    uint32_t fa[T::MT][4], fb[T::NT][2];
#pragma unroll
    for (int i = 0; i < T::MT; ++i) {
      const float* a = sa + k * LA + i * 16 + g;  // a[kk * LA + row]
      if constexpr (BF16) {
        fa[i][0] = detail::to_bf16x2(a[2 * t * LA], a[(2 * t + 1) * LA]);
        fa[i][1] = detail::to_bf16x2(a[2 * t * LA + 8], a[(2 * t + 1) * LA + 8]);
        fa[i][2] = detail::to_bf16x2(a[(2 * t + 8) * LA], a[(2 * t + 9) * LA]);
        fa[i][3] = detail::to_bf16x2(a[(2 * t + 8) * LA + 8], a[(2 * t + 9) * LA + 8]);
      } else {
        fa[i][0] = detail::to_tf32(a[t * LA]), fa[i][1] = detail::to_tf32(a[t * LA + 8]);
        fa[i][2] = detail::to_tf32(a[(t + 4) * LA]);
        fa[i][3] = detail::to_tf32(a[(t + 4) * LA + 8]);
      }
    }
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
      const float* b = sb + k * LB + j * 8 + g;  // b[kk * LB + column]
      if constexpr (BF16) {
        fb[j][0] = detail::to_bf16x2(b[2 * t * LB], b[(2 * t + 1) * LB]);
        fb[j][1] = detail::to_bf16x2(b[(2 * t + 8) * LB], b[(2 * t + 9) * LB]);
      } else {
        fb[j][0] = detail::to_tf32(b[t * LB]), fb[j][1] = detail::to_tf32(b[(t + 4) * LB]);
      }
    }
    mma_tiles<T, BF16>(fa, fb, acc);
  }
}

template <class T, bool BF16>
__device__ __forceinline__ void multiply_mma(const float* sa, const float* sb, Acc<T>& acc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  sa += (warp / T::WARPS_N) * T::WM * kLds;
  sb += (warp % T::WARPS_N) * T::WN * kLds;
  auto pair = [](const float* p) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    return detail::to_bf16x2(v.x, v.y);
  };
  constexpr int kStep = BF16 ? 16 : 8;
#pragma unroll
  for (int k = 0; k < kBK; k += kStep) {
    uint32_t fa[T::MT][4], fb[T::NT][2];
#pragma unroll
    for (int i = 0; i < T::MT; ++i) {
      const float* r0 = sa + (i * 16 + g) * kLds + k;
      const float* r8 = r0 + 8 * kLds;
      if constexpr (BF16) {
        fa[i][0] = pair(r0 + 2 * t), fa[i][1] = pair(r8 + 2 * t);
        fa[i][2] = pair(r0 + 2 * t + 8), fa[i][3] = pair(r8 + 2 * t + 8);
      } else {
        fa[i][0] = detail::to_tf32(r0[t]), fa[i][1] = detail::to_tf32(r8[t]);
        fa[i][2] = detail::to_tf32(r0[t + 4]), fa[i][3] = detail::to_tf32(r8[t + 4]);
      }
    }
#pragma unroll
    for (int j = 0; j < T::NT; ++j) {
      const float* n0 = sb + (j * 8 + g) * kLds + k;
      if constexpr (BF16) {
        fb[j][0] = pair(n0 + 2 * t), fb[j][1] = pair(n0 + 2 * t + 8);
      } else {
        fb[j][0] = detail::to_tf32(n0[t]), fb[j][1] = detail::to_tf32(n0[t + 4]);
      }
    }
    mma_tiles<T, BF16>(fa, fb, acc);
  }
}

// The block's GEMM. `Problem` provides, for block index z (group, and slice of the inner range):
//   k_range(z, begin, end); M, N; make_a(m0, z, k_end) and make_b(n0, z, k_end), loaders whose
//   load(float* tile, int k0) issues the cp.async copies of slab k0 of the block's rows m0.. or
//   n0.. (zero-filled outside); store(z, m, n, value) for m < M, n < N; kBlocksPerSm, the blocks
//   an SM should hold at once (2 caps registers at 128 a thread: 1 where that would spill, as
//   for the 128 x 128 FFMA tile and the loaders that keep many rows' coordinates in registers);
//   kKOuter, whether its loaders fill k-outer tiles.
template <class T, GemmMath MATH, class Problem>
__global__ void __launch_bounds__(kThreads, Problem::kBlocksPerSm) gemm_kernel(const Problem prob) {
  extern __shared__ float4 shared4[];
  float* smem = reinterpret_cast<float*>(shared4);
  const int m0 = blockIdx.x * T::BM, n0 = blockIdx.y * T::BN, z = blockIdx.z;
  int k_begin, k_end;
  prob.k_range(z, k_begin, k_end);
  const auto load_a = prob.make_a(m0, z, k_end);
  const auto load_b = prob.make_b(n0, z, k_end);
  const int slabs = (k_end - k_begin + kBK - 1) / kBK;
  auto stage_a = [&](int s) { return smem + s * T::STAGE_FLOATS; };
  constexpr bool kOuter = Problem::kKOuter;
  constexpr int kOffsetB = kOuter ? kBK * (T::BM + 4) : T::BM * kLds;
  static_assert(kBK * (T::BM + T::BN + 8) <= T::STAGE_FLOATS, "a k-outer stage fits");
  auto stage_b = [&](int s) { return smem + s * T::STAGE_FLOATS + kOffsetB; };
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
    if constexpr (MATH == GemmMath::fp32 && kOuter) {
      multiply_ffma_outer<T>(stage_a(s), stage_b(s), acc);
    } else if constexpr (MATH == GemmMath::fp32) {
      multiply_ffma<T>(stage_a(s), stage_b(s), acc);
    } else if constexpr (kOuter) {
      multiply_mma_outer<T, MATH == GemmMath::bf16>(stage_a(s), stage_b(s), acc);
    } else {
      multiply_mma<T, MATH == GemmMath::bf16>(stage_a(s), stage_b(s), acc);
    }
  }
  detail::cp_async_wait<0>();
  if constexpr (MATH == GemmMath::fp32) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int i = 0; i < T::FM; ++i) {
      const int m = m0 + (kOuter ? 4 * ty + i % 4 + 64 * (i / 4) : ty + 16 * i);
      if (m >= prob.M) continue;
#pragma unroll
      for (int j = 0; j < T::FN; ++j) {
        const int n = n0 + (kOuter ? 4 * tx + j % 4 + 64 * (j / 4) : tx + 16 * j);
        if (n < prob.N) prob.store(z, m, n, acc.v[i * T::FN + j]);
      }
    }
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wm = m0 + (warp / T::WARPS_N) * T::WM, wn = n0 + (warp % T::WARPS_N) * T::WN;
#pragma unroll
    for (int i = 0; i < T::MT; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m = wm + i * 16 + g + 8 * half;
        if (m >= prob.M) continue;
#pragma unroll
        for (int j = 0; j < T::NT; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = wn + j * 8 + 2 * t + e;
            if (n < prob.N) prob.store(z, m, n, acc.v[(i * T::NT + j) * 4 + 2 * half + e]);
          }
        }
      }
    }
  }
}

}  // namespace crema::kernels::cuda::nhwc
