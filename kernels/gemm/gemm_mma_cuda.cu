// t1 tf32_mma and t2 bf16_mma: tensor cores through mma.sync, fp32 accumulation. One kernel
// template for both; they differ in the instruction and in how fragments are rounded.
//
//   block tile 128 x 128, k slab 32, 8 warps as 2 (m) x 4 (n), warp tile 64 x 32
//   shared ring of 3 slabs filled with cp.async (16-byte copies where the operand is 16-byte
//   aligned with a leading dimension a multiple of 4, 4-byte copies otherwise; zero-filled past
//   the edges): the copy of slab t+2 runs while slab t is multiplied
//   t1: mma.sync m16n8k8 TF32: each fragment element is read from shared memory as fp32 and
//       rounded with cvt.rna.tf32.f32; 4 m tiles x 4 n tiles = 16 mma per warp per k step of 8
//   t2: mma.sync m16n8k16 bf16: pairs along k are rounded to bf16 with cvt.rn.bf16x2.f32
//
// Operands stay fp32 in memory and in shared memory (what a framework hands over). A slab is
// stored as its source runs: k-contiguous operands as [outer][32 + pad], outer-contiguous ones as
// [32][128 + pad], so cp.async copies 16 bytes unchanged. The pads make one fragment load of a
// warp hit 32 distinct banks (row strides of 36/40 or 136/132 words, see kPad).
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 3, kThreads = 256;
constexpr int kWarpM = 64, kWarpN = 32;  // warp tile
constexpr int kMTiles = kWarpM / 16, kNTiles = kWarpN / 8;

// Row padding in floats. A warp's fragment load touches (row g, column t) for g < 8, t < 4
// (TF32) or rows g and column pairs 2t, 2t+1 (bf16, read as float2 when k-contiguous). With a
// k-contiguous stride of 36 words, TF32's 36g + t covers 32 banks; bf16's float2s need 40 (8g +
// 2t). Outer-contiguous (k rows of 128 + pad): TF32 reads (k = t, outer = g): 136 gives 8t + g;
// bf16 reads k = 2t: 132 gives 8t + g.
template <bool BF16, bool K_CONTIGUOUS>
constexpr int kPad = K_CONTIGUOUS ? (BF16 ? 8 : 4) : (BF16 ? 4 : 8);

// One operand's slab in shared memory and how element (outer, k) is found in it.
template <bool BF16, bool K_CONTIGUOUS>
struct Slab {
  static constexpr int STRIDE = K_CONTIGUOUS ? kBK + kPad<BF16, true> : kBM + kPad<BF16, false>;
  static constexpr int FLOATS = K_CONTIGUOUS ? kBM * STRIDE : kBK * STRIDE;
  __device__ static int at(int outer, int k) {
    return K_CONTIGUOUS ? outer * STRIDE + k : k * STRIDE + outer;
  }
};

// Queues the cp.asyncs that copy one operand's slab (outer rows o0.., inner columns k0..) into
// `slab`. Element (o, k) of the operand is p[o*ld + k] when K_CONTIGUOUS, else p[k*ld + o].
template <bool BF16, bool K_CONTIGUOUS, bool VEC>
__device__ __forceinline__ void load_slab(float* slab, const float* p, int64_t ld, int o0,
                                          int outer_size, int k0, int k_size, int tid) {
  using S = Slab<BF16, K_CONTIGUOUS>;
  // Runs of W elements along the contiguous side; consecutive threads take consecutive runs.
  constexpr int W = VEC ? 4 : 1;
  constexpr int RUNS_PER_LINE = (K_CONTIGUOUS ? kBK : kBM) / W;
  constexpr int RUNS = kBM * kBK / W;
#pragma unroll
  for (int i = 0; i < RUNS / kThreads; ++i) {
    const int run = tid + i * kThreads;
    const int line = run / RUNS_PER_LINE, pos = run % RUNS_PER_LINE * W;
    const int o = K_CONTIGUOUS ? line : pos, k = K_CONTIGUOUS ? pos : line;
    const int go = o0 + o, gk = k0 + k;
    const int left = K_CONTIGUOUS ? k_size - gk : outer_size - go;  // along the run
    const bool inside = (K_CONTIGUOUS ? go < outer_size : gk < k_size) && left > 0;
    const float* src = inside ? (K_CONTIGUOUS ? p + go * ld + gk : p + gk * ld + go) : p;
    const int bytes = inside ? 4 * (left < W ? left : W) : 0;
    cp_async<4 * W>(slab + S::at(o, k), src, bytes);
  }
}

// Two consecutive-k elements (outer, k), (outer, k + 1) of a slab as a bf16 pair.
template <bool BF16, bool K_CONTIGUOUS>
__device__ __forceinline__ uint32_t bf16_pair(const float* slab, int outer, int k) {
  using S = Slab<BF16, K_CONTIGUOUS>;
  if constexpr (K_CONTIGUOUS) {
    const float2 v = *reinterpret_cast<const float2*>(slab + S::at(outer, k));
    return to_bf16x2(v.x, v.y);
  } else {
    return to_bf16x2(slab[S::at(outer, k)], slab[S::at(outer, k + 1)]);
  }
}

// acc += this warp's part of the slab's product. Fragment layouts (PTX ISA, mma.m16n8k8 .tf32 and
// m16n8k16 .bf16), g = lane / 4, t = lane % 4: TF32 a = (g, t), (g+8, t), (g, t+4), (g+8, t+4),
// b = (k t, n g), (k t+4, n g); bf16 a = (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..),
// b = (k 2t.., n g), (k 2t+8.., n g); c = (g, 2t..2t+1), (g+8, 2t..2t+1).
template <bool BF16, bool TA, bool TB>
__device__ __forceinline__ void multiply_slab(const float* sa, const float* sb, int wm, int wn,
                                              int lane, float (&acc)[kMTiles][kNTiles][4]) {
  using SA = Slab<BF16, !TA>;
  using SB = Slab<BF16, TB>;
  const int g = lane / 4, t = lane % 4;
  constexpr int KSTEP = BF16 ? 16 : 8;
#pragma unroll
  for (int kk = 0; kk < kBK; kk += KSTEP) {
    uint32_t a[kMTiles][4], b[kNTiles][2];
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      const int r = wm * kWarpM + i * 16 + g;
      if constexpr (BF16) {
        a[i][0] = bf16_pair<true, !TA>(sa, r, kk + 2 * t);
        a[i][1] = bf16_pair<true, !TA>(sa, r + 8, kk + 2 * t);
        a[i][2] = bf16_pair<true, !TA>(sa, r, kk + 2 * t + 8);
        a[i][3] = bf16_pair<true, !TA>(sa, r + 8, kk + 2 * t + 8);
      } else {
        a[i][0] = to_tf32(sa[SA::at(r, kk + t)]);
        a[i][1] = to_tf32(sa[SA::at(r + 8, kk + t)]);
        a[i][2] = to_tf32(sa[SA::at(r, kk + t + 4)]);
        a[i][3] = to_tf32(sa[SA::at(r + 8, kk + t + 4)]);
      }
    }
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      const int n = wn * kWarpN + j * 8 + g;
      if constexpr (BF16) {
        b[j][0] = bf16_pair<true, TB>(sb, n, kk + 2 * t);
        b[j][1] = bf16_pair<true, TB>(sb, n, kk + 2 * t + 8);
      } else {
        b[j][0] = to_tf32(sb[SB::at(n, kk + t)]);
        b[j][1] = to_tf32(sb[SB::at(n, kk + t + 4)]);
      }
    }
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        if constexpr (BF16) {
          mma_bf16(acc[i][j], a[i], b[j]);
        } else {
          mma_tf32(acc[i][j], a[i], b[j]);
        }
      }
    }
  }
}

// Two blocks per SM (at most 128 registers) on the 16-byte path; the 4-byte fallback's many copies
// need more registers than that.
template <bool BF16, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(kThreads, VEC ? 2 : 1)
    gemm_mma_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
                    const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
                    int64_t ldc) {
  using SA = Slab<BF16, !TA>;
  using SB = Slab<BF16, TB>;
  extern __shared__ __align__(16) float smem[];  // kStages x (A slab, B slab)
  constexpr int STAGE = SA::FLOATS + SB::FLOATS;
  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  const TileCoord tile = grouped_tile(blockIdx.x, tiles_m, tiles_n, 8);
  const int m0 = tile.m * kBM, n0 = tile.n * kBN;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 4, wn = warp % 4;
  const int slabs = (K + kBK - 1) / kBK;

  auto load = [&](int s) {
    float* stage = smem + s % kStages * STAGE;
    load_slab<BF16, !TA, VEC>(stage, A, lda, m0, M, s * kBK, K, tid);
    load_slab<BF16, TB, VEC>(stage + SA::FLOATS, B, ldb, n0, N, s * kBK, K, tid);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < slabs) load(s);
    cp_async_commit();
  }
  float acc[kMTiles][kNTiles][4] = {};
  for (int s = 0; s < slabs; ++s) {
    cp_async_wait<kStages - 2>();  // slab s has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and slab s-1's stage is free to refill
    if (s + kStages - 1 < slabs) load(s + kStages - 1);
    cp_async_commit();
    const float* stage = smem + s % kStages * STAGE;
    multiply_slab<BF16, TA, TB>(stage, stage + SA::FLOATS, wm, wn, lane, acc);
  }
  cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + wm * kWarpM + i * 16 + g + half * 8;
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const int n = n0 + wn * kWarpN + j * 8 + 2 * t;
        store_pair(C, ldc, m, n, N, alpha, beta, acc[i][j][2 * half], acc[i][j][2 * half + 1]);
      }
    }
  }
}

template <bool BF16, bool TA, bool TB, bool VEC>
void launch(const GemmArgs& g, gpu::Stream stream) {
  constexpr int bytes = kStages * (Slab<BF16, !TA>::FLOATS + Slab<BF16, TB>::FLOATS) * 4;
  auto kernel = gemm_mma_kernel<BF16, TA, TB, VEC>;
  set_shared_memory_limit(kernel, bytes, "gemm_mma");
  kernel<<<tile_grid(g.M, g.N, kBM, kBN), kThreads, bytes, stream>>>(
      g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
  gpu::check_launch(BF16 ? "gemm_mma (bf16)" : "gemm_mma (tf32)");
}

template <bool BF16>
void dispatch(const GemmArgs& g, gpu::Stream stream) {
  const bool vec = vector_ok(g.A, g.lda) && vector_ok(g.B, g.ldb);
  for_layout(g, [&](auto ta, auto tb) {
    constexpr bool TA = decltype(ta)::value, TB = decltype(tb)::value;
    if (vec) {
      launch<BF16, TA, TB, true>(g, stream);
    } else {
      launch<BF16, TA, TB, false>(g, stream);
    }
  });
}

}  // namespace

void gemm_mma(const GemmArgs& args, bool bf16, gpu::Stream stream) {
  if (bf16) {
    dispatch<true>(args, stream);
  } else {
    dispatch<false>(args, stream);
  }
}

}  // namespace crema::kernels::cuda::detail
