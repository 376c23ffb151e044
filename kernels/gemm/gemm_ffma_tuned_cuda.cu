// Production's 128 x 128 fp32 SIMT (FFMA) loop, the ladder's s14 edge_free_loads: s13's loop
// (ladder/gemm_double_buffer_cuda.cu: the shared-memory and register pipelines both
// double-buffered, two blocks per SM) whose slabs inside C skip the loaders' edge tests (below:
// `interior`). s16 ffma_tuned (cuda::sgemm) runs it where s15 would pick its 128 x 128 tile, and
// s15's smaller tiles elsewhere.
//
//   block tile BM x BN, k slab BK, THREADS = 32 * WARPS_M * WARPS_N threads, TM x TN results
//   per thread, made of 4 x 4 groups spread LANES_M * 4 rows and LANES_N * 4 columns apart
//   warp tile (LANES_M * TM) x (LANES_N * TN): lane (lane / LANES_N, lane % LANES_N); per k a
//   warp reads LANES_M distinct float4s of the A slab (broadcast to the LANES_N lanes that share
//   them) and LANES_N distinct float4s of B: one shared-memory wavefront each
//   two shared slabs: slab s+1 is fetched into registers at the start of slab s and stored into
//   the other buffer just before its last k step, behind the block's one barrier per slab
//   two register fragments: the fragments of step k+1 are read from shared memory while the
//   FFMAs of step k run (step BK-1 reads step 0 of the next slab, after the barrier)
//   blocks walk the tiles of C in groups of 8 tile rows (L2 reuse of the operand panels)
//   at most 128 registers for two blocks of 256 threads per SM: the loop needs 16 warps per SM
//   (README.md: 8 warps, s15's 129 registers, cost 7-14%)
//
// The loaders are s8's (kernels/tiles/block_tile.cuh: zero-fill past the edges, scalar fallback for
// unaligned operands), so every shape, transpose, leading dimension and alignment is accepted.
#include <cuda_runtime.h>

#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/tiles/block_tile.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

template <int TM_, int TN_, int LANES_M_, int WARPS_M_, int WARPS_N_, int BK_, int MIN_BLOCKS_>
struct FfmaConfig {
  static constexpr int TM = TM_, TN = TN_, BK = BK_, MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int LANES_M = LANES_M_, LANES_N = 32 / LANES_M_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int WARP_M = LANES_M * TM, WARP_N = LANES_N * TN;
  static constexpr int BM = WARPS_M * WARP_M, BN = WARPS_N * WARP_N;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 2 == 0, "4 x 4 groups, an even slab");
  static_assert(BM * BK % (4 * THREADS) == 0 && BN * BK % (4 * THREADS) == 0,
                "every thread loads whole float4s of each slab");
};

// 128 x 128 x 8, 256 threads of 8 x 8, warps 4 (m) x 2 (n) of 32 x 64, two blocks per SM: the
// fastest of the shapes measured (README.md, s16's lessons).
using Tuned = FfmaConfig<8, 8, 4, 4, 2, 8, 2>;

template <class Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    sgemm_ffma_kernel(int M, int N, int K_all, float alpha, const float* __restrict__ A_all,
                      int64_t lda, const float* __restrict__ B_all, int64_t ldb, float beta,
                      float* __restrict__ C_all, int64_t ldc, bool vec_a, bool vec_b, bool vec_c,
                      int k_chunk, int64_t split_stride) {
  const KSplitPart<TA, TB> part(K_all, A_all, lda, B_all, ldb, C_all, k_chunk, split_stride);
  const int K = part.K;
  const float* __restrict__ A = part.A;
  const float* __restrict__ B = part.B;
  float* __restrict__ C = part.C;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int STEP_M = Cfg::LANES_M * 4, STEP_N = Cfg::LANES_N * 4;  // between 4 x 4 groups
  __shared__ __align__(16) float sa[2][BK][BM + tile::kPad];  // op(A) slabs, k-major: [k][m]
  __shared__ __align__(16) float sb[2][BK][BN + tile::kPad];  // op(B) slabs: [k][n]
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const TileCoord tile = grouped_tile(blockIdx.x, tiles_m, tiles_n, 8);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // First row and column of the thread's 4 x 4 groups in the block tile.
  const int row = warp / Cfg::WARPS_N * Cfg::WARP_M + lane / Cfg::LANES_N * 4;
  const int col = warp % Cfg::WARPS_N * Cfg::WARP_N + lane % Cfg::LANES_N * 4;

  tile::DenseLoader<BM, BK, Cfg::THREADS, !TA> load_a{A, lda, m0, M, K, vec_a, tid, {}};
  tile::DenseLoader<BN, BK, Cfg::THREADS, TB> load_b{B, ldb, n0, N, K, vec_b, tid, {}};
  // Slabs of a block whose rows of op(A) and columns of op(B) all lie inside aligned matrices,
  // and whose k range is whole, skip the loaders' edge tests: the same float4s through pointers
  // that walk one slab down the inner dimension at a time.
  const bool interior = vec_a && vec_b && m0 + BM <= M && n0 + BN <= N;
  const int64_t step_a = TA ? BK * lda : BK, step_b = TB ? BK : BK * ldb;
  const float* pa[decltype(load_a)::PER_THREAD];
  const float* pb[decltype(load_b)::PER_THREAD];
#pragma unroll
  for (int t = 0; t < decltype(load_a)::PER_THREAD; ++t) {
    int o, k;
    load_a.position(t, o, k);
    pa[t] = TA ? A + k * lda + m0 + o : A + (m0 + o) * lda + k;
  }
#pragma unroll
  for (int t = 0; t < decltype(load_b)::PER_THREAD; ++t) {
    int o, k;
    load_b.position(t, o, k);
    pb[t] = TB ? B + (n0 + o) * ldb + k : B + k * ldb + n0 + o;
  }
  auto fetch = [&](int s) {  // slab s into the loaders' registers
    if (interior && (s + 1) * BK <= K) {
#pragma unroll
      for (int t = 0; t < decltype(load_a)::PER_THREAD; ++t) {
        load_a.regs[t] = *reinterpret_cast<const float4*>(pa[t] + s * step_a);
      }
#pragma unroll
      for (int t = 0; t < decltype(load_b)::PER_THREAD; ++t) {
        load_b.regs[t] = *reinterpret_cast<const float4*>(pb[t] + s * step_b);
      }
    } else {
      load_a.fetch(s * BK);
      load_b.fetch(s * BK);
    }
  };
  fetch(0);
  load_a.stash(sa[0]);
  load_b.stash(sb[0]);
  __syncthreads();

  // fa[f] / fb[f]: the thread's TM entries of an A slab row and TN of a B slab row.
  float fa[2][TM], fb[2][TN];
  auto load_fragments = [&](int buf, int k, float(&a)[TM], float(&b)[TN]) {
#pragma unroll
    for (int g = 0; g < TM / 4; ++g) {
      const float4 v = *reinterpret_cast<const float4*>(&sa[buf][k][row + g * STEP_M]);
      a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
    }
#pragma unroll
    for (int g = 0; g < TN / 4; ++g) {
      const float4 v = *reinterpret_cast<const float4*>(&sb[buf][k][col + g * STEP_N]);
      b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
    }
  };
  load_fragments(0, 0, fa[0], fb[0]);

  float acc[TM][TN] = {};
  const int slabs = (K + BK - 1) / BK;
  for (int s = 0; s < slabs; ++s) {
    const int buf = s % 2;
    const bool more = s + 1 < slabs;
    if (more) fetch(s + 1);  // global -> registers, stored at the last step of this slab
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const int f = k % 2, next = 1 - f;
      if (k + 1 < BK) {
        load_fragments(buf, k + 1, fa[next], fb[next]);
      } else if (more) {
        // The other buffer was last read before the previous barrier: refill it, then read the
        // next slab's first fragments while this slab's last FFMAs run.
        load_a.stash(sa[1 - buf]);
        load_b.stash(sb[1 - buf]);
        __syncthreads();
        load_fragments(1 - buf, 0, fa[next], fb[next]);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[f][i], fb[f][j], acc[i][j]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + row + i / 4 * STEP_M + i % 4;
    if (m >= M) continue;
#pragma unroll
    for (int g = 0; g < TN / 4; ++g) {
      const int n = n0 + col + g * STEP_N;
      if (n >= N) continue;
      float* c = C + m * ldc + n;
      const float* v = &acc[i][4 * g];
      if (vec_c && n + 4 <= N) {
        float4 r = beta == 0.0f ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                                : *reinterpret_cast<const float4*>(c);
        r.x = alpha * v[0] + beta * r.x, r.y = alpha * v[1] + beta * r.y;
        r.z = alpha * v[2] + beta * r.z, r.w = alpha * v[3] + beta * r.w;
        *reinterpret_cast<float4*>(c) = r;
      } else {
        for (int e = 0; e < 4 && n + e < N; ++e) {
          c[e] = beta == 0.0f ? alpha * v[e] : alpha * v[e] + beta * c[e];
        }
      }
    }
  }
}

}  // namespace

void sgemm_ffma_tuned(const GemmArgs& g, gpu::Stream stream, const KSplit& split) {
  for_layout(g, [&](auto ta, auto tb) {
    launch_over_tiles(sgemm_ffma_kernel<Tuned, decltype(ta)::value, decltype(tb)::value>, Tuned::BM,
                      Tuned::BN, Tuned::THREADS, g, split, stream, "sgemm_ffma_tuned");
  });
}

}  // namespace crema::kernels::cuda::detail
