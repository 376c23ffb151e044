// The f32 filter gradient's kernel at 128 columns (convolution_tc_wgmma_filter_sm90a.cu, "f32 in
// tf32"): a warpgroup of transposers between the TMA's raw ring and a K-major ring, one block an
// SM; any Problem with the filter gradient's interface (convolution_tc_wgmma_filter.cuh).
// Included by that file alone (sm_90a).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::tc::filter {

using wg::kBM, wg::kRowBytes;

// f32 in tf32 at 128 columns: the transposers' warpgroup (128 threads) between the producer warp
// and the consumers, kTf32Threads a block, one block an SM. Two rings, each stage A's 128 rows and
// B's BN of 128 bytes: the raw ring (the TMA's MN-major boxes) and the K-major ring (the
// transposers' tiles), 96 KB each (3 stages at BN 128, 4 at 64), then four barriers a stage: raw
// full (the producer's arrive and the TMA's bytes), raw empty (the transposers), K-major full (the
// transposers), K-major empty (the consumers). The epilogue parks its tile in the drained raw ring
// (69.6 KB at most). Measured alternatives (H200, 2026-11-28, session 22, calls 2-4, against this
// in the same call): two transposer warpgroups 1.01-1.04x the time; 5 raw and 2 K-major stages at
// BN 128 (6 and 3 at 64) 0.97-1.04x; rounding skipped 0.94x (the operands would be truncated).
constexpr int kTransposers = 128, kTf32Threads = wg::kThreads + kTransposers + 32;

template <int BN>
struct Tf32Ring {
  static constexpr int STAGE_BYTES = (kBM + BN) * kRowBytes;
  static constexpr int RAW_STAGES = BN == 128 ? 3 : 4, TILE_STAGES = RAW_STAGES;
  static constexpr int KMAJOR = RAW_STAGES * STAGE_BYTES;
  static constexpr int BARRIERS = KMAJOR + TILE_STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES =
      BARRIERS + 2 * (RAW_STAGES + TILE_STAGES) * 8 + 1024;  // + room to align the base
  static_assert(TILE_STAGES >= 2 && RAW_STAGES >= 2 && SMEM_BYTES <= wg::kMaxSharedBytes,
                "the rings fit");
  static_assert(wg::kThreads / 32 * wg::staging_warp_floats(BN) * 4 <= KMAJOR &&
                    BN * (kBM + 4) * 4 <= KMAJOR,
                "the epilogue's tile fits the raw ring");
};

// One stage's boxes (A's 4 and B's BN / 32, 4096 bytes each, at the same offsets in both rings),
// from the TMA's layout -- row p = position p, 32 channels, chunk j (channels 4j .. 4j+3) at chunk
// j ^ (p % 8) -- to the K-major one -- row m = channel m, 32 positions, chunk a (positions 4a ..
// 4a+3) at chunk a ^ (m % 8) -- each value rounded to TF32. A thread moves 4 x 4 blocks: 4 loads
// of 16 bytes (positions 4a .. 4a+3 at channels 4c ..), 4 stores (channels 4c .. 4c+3 at positions
// 4a ..). The 8 lanes of a quarter-warp (one 16-byte access each: a shared-memory wavefront) take
// a = k, c = k ^ d (k = lane % 8, d one of 8 a box): their chunks c ^ (4 (a % 2) + i) and
// a ^ (4 (c % 2) + i) are 8 distinct ones, so no access conflicts.
template <int BN>
__device__ __forceinline__ void transpose_stage(const uint8_t* raw, uint8_t* kmajor, int thread) {
  constexpr int kBoxes = (kBM + BN) / 32, kQuarters = kTransposers / 8;
  const int k = thread % 8;
  // A loop, not unrolled: the unrolled form (every load first) took 1.04-1.17x the time
  // (H200, 2026-11-28, session 22, call 4).
  for (int task = thread / 8; task < kBoxes * 8; task += kQuarters) {
    const int a = k, c = k ^ (task % 8);
    const uint8_t* from = raw + task / 8 * 4096;
    uint8_t* to = kmajor + task / 8 * 4096;
    float4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int p = 4 * a + i;
      v[i] = *reinterpret_cast<const float4*>(from + p * kRowBytes + 16 * (c ^ (p % 8)));
    }
    auto tf32 = [](float x) { return __uint_as_float(detail::to_tf32(x)); };
    const float4 t[4] = {make_float4(tf32(v[0].x), tf32(v[1].x), tf32(v[2].x), tf32(v[3].x)),
                         make_float4(tf32(v[0].y), tf32(v[1].y), tf32(v[2].y), tf32(v[3].y)),
                         make_float4(tf32(v[0].z), tf32(v[1].z), tf32(v[2].z), tf32(v[3].z)),
                         make_float4(tf32(v[0].w), tf32(v[1].w), tf32(v[2].w), tf32(v[3].w))};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = 4 * c + i;
      *reinterpret_cast<float4*>(to + m * kRowBytes + 16 * (a ^ (m % 8))) = t[i];
    }
  }
}

// The f32 filter gradient's kernel: one unit (blockIdx.x) a block, FilterProblem<float>'s fill,
// slabs and store. Lane 0 of the last warp fills the raw ring; the transposers turn raw stage s
// into K-major stage s (once the consumers released that stage's last tenant), make their stores
// visible to the async proxy (wgmma reads through it), and hand both stages on; the consumers
// (warpgroups 0 and 1) run wgmma m64nBNk8 on the K-major tiles as the 16-bit kernel does on its
// ring, keeping one slab's group in flight.
template <int BN, class Problem>
__global__ void __launch_bounds__(kTf32Threads, 1)
    tf32_filter_kernel(const __grid_constant__ CUtensorMap map_r,
                       const __grid_constant__ CUtensorMap map_s,
                       const __grid_constant__ Problem problem) {
  using R = Tf32Ring<BN>;
  static_assert(Problem::kTransposes && !Problem::kMnMajorA && !Problem::kMnMajorB,
                "the wgmmas read the transposers' K-major tiles");
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t align = (1024 - raw_address % 1024) % 1024;
  uint8_t* ring = raw_smem + align;  // the raw ring, then the K-major one
  const uint32_t base = raw_address + align, bars = base + R::BARRIERS;
  constexpr int RS = R::RAW_STAGES, TS = R::TILE_STAGES;
  auto raw_full = [&](int s) { return bars + 8 * s; };
  auto raw_empty = [&](int s) { return bars + 8 * (RS + s); };
  auto tile_full = [&](int s) { return bars + 8 * (2 * RS + s); };
  auto tile_empty = [&](int s) { return bars + 8 * (2 * RS + TS + s); };

  const int tid = threadIdx.x;
  if (tid == 0) {
    wg::prefetch_tensor_map(&map_r), wg::prefetch_tensor_map(&map_s);
    for (int s = 0; s < RS; ++s) {
      wg::mbarrier_init(raw_full(s), 1);
      wg::mbarrier_init(raw_empty(s), kTransposers);
    }
    for (int s = 0; s < TS; ++s) {
      wg::mbarrier_init(tile_full(s), kTransposers);
      wg::mbarrier_init(tile_empty(s), wg::kThreads);
    }
    wg::fence_barrier_init();
  }
  __syncthreads();
  const auto where = problem.locate(int(blockIdx.x));
  const int slabs = problem.slabs(where);

  if (tid >= wg::kThreads + kTransposers) {  // the producer warp
    if (tid != wg::kThreads + kTransposers) return;
    for (int s = 0; s < slabs; ++s) {
      const int stage = s % RS;
      if (s >= RS) wg::mbarrier_wait(raw_empty(stage), (s / RS - 1) & 1);
      problem.fill(where, s, base + stage * R::STAGE_BYTES, raw_full(stage), &map_r, &map_s);
    }
    return;
  }
  if (tid >= wg::kThreads) {  // the transposers
    for (int s = 0; s < slabs; ++s) {
      const int raw = s % RS, tile = s % TS;
      wg::mbarrier_wait(raw_full(raw), (s / RS) & 1);
      if (s >= TS) wg::mbarrier_wait(tile_empty(tile), (s / TS - 1) & 1);
      transpose_stage<BN>(ring + raw * R::STAGE_BYTES, ring + R::KMAJOR + tile * R::STAGE_BYTES,
                          tid - wg::kThreads);
      detail::fence_async_shared();
      wg::mbarrier_arrive(tile_full(tile));
      wg::mbarrier_arrive(raw_empty(raw));
    }
    return;
  }

  const int consumer = tid / 128;
  float acc[BN / 2];
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) acc[a] = 0.0f;
  for (int s = 0; s < slabs; ++s) {
    const int stage = s % TS;
    wg::mbarrier_wait(tile_full(stage), (s / TS) & 1);
    const uint32_t tile = base + R::KMAJOR + stage * R::STAGE_BYTES;
    detail::wgmma_fence();
    wg::slab_mma<float, BN, false, false>(acc, tile + consumer * 8192, tile + kBM * kRowBytes);
    detail::wgmma_commit();
    detail::wgmma_wait<1>();  // slab s-1's group has retired: its stage goes back
    if (s > 0) wg::mbarrier_arrive(tile_empty((s - 1) % TS));
  }
  detail::wgmma_wait<0>();
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) detail::fence_register(acc[a]);
  // The raw ring is drained: the transposers read every stage before the consumers' last wait.
  wg::consumers_sync();
  float* staging = reinterpret_cast<float*>(ring) + (tid / 32) * wg::staging_warp_floats(BN);
  problem.template store<BN>(where, consumer, acc, staging);
}

}  // namespace crema::kernels::cuda::tc::filter
