// Streaming tiles: the wgmma forward and backward data of a stride-1 1x1 whose reduction is at
// most 4 slabs, 8 onto at most 64 columns (ResNet's 64 -> 256 forward, 256 -> 64 data;
// MobileNet's expansions; plan: convolution_tc_wgmma_plan_sm90a.cu's stream_*), where the
// output is 2-8x the input and the pass is a copy of the output's bytes with a little tensor
// work on the way. convolution_tc_wgmma.cuh's kernel spends such a tile on fixed costs: each of
// its units waits for its own A and B, and its epilogue's 16-byte stores hold the consumers until
// the last one has issued (H200, session 22, ncu: the 1x1 256 -> 64 data at 56 x 56, batch 64,
// took 44.6 us with its stores removed, 61 with them; cuDNN's whole pass 40). Here (session 28:
// that pass 38 us, MEASUREMENTS.md "Streaming tiles") one block an SM walks row tiles of one
// column tile:
//   - B (the filter: the column tile's rows of every slab) is loaded once and stays;
//   - the producer warp asks the TMA for each tile's slabs of A, a slab a stage of a ring of up to
//     8 stages, running ahead of the consumers by the ring;
//   - the two consumer warpgroups (64 rows each) run the tile's wgmmas, release the stage, and
//     write their rows as 16-bit or f32 outputs (bias and ReLU applied) into boxes of 64 rows x
//     128 bytes of columns in shared memory, 128B-swizzled as the TMA reads them, each box then
//     stored by the TMA (cp.async.bulk.tensor, shared -> global) while the warpgroup goes on:
//     four boxes a warpgroup in flight, a box reused once its store has read it
//     (cp.async.bulk.wait_group.read).
// The TMA clips the stores at the tensor's edges (rows past M, columns past the GEMM's). No
// residual, no channel statistics (those take convolution_tc_wgmma.cuh's kernel). sm_90a files
// only, as convolution_tc_wgmma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma_conv.cuh"
#include "kernels/convolution/convolution_tc_wgmma_out.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc::wg {

// The TMA stores the box of `map` at coordinates (c0, c1), innermost first, from shared `src`
// (as the map's swizzle lays it out), in the thread's current bulk group.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
}
// Closes the thread's bulk group of stores.
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most PENDING of the thread's bulk groups still read their shared memory (READ),
// or are still writing (not READ: the writes done).
template <int PENDING, bool READ>
__device__ __forceinline__ void bulk_wait() {
  if constexpr (READ) {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
  } else {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(PENDING) : "memory");
  }
}
// The 128 threads of warpgroup `consumer` (named barriers 2 and 3; 1 is both warpgroups').
__device__ __forceinline__ void warpgroup_sync(int consumer) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(2 + consumer) : "memory");
}

// A streaming launch's work: the flat rows (Rows with box_p 0: 128 pixels a tile), the GEMM's
// columns in `column_tiles` tiles of BN, bias (null: none) and ReLU. Block b takes column tile
// b % column_tiles and row tiles b / column_tiles, + gridDim.x / column_tiles, ... (gridDim.x a
// multiple of column_tiles: a row tile's column tiles run side by side, its A read from memory
// once).
struct StreamWork {
  Rows rows;
  int columns, column_tiles;
  const float* bias;
  bool relu;
};

// The shared memory of a streaming block: B resident (up to SLABS slabs of BN rows), the output
// boxes (kBoxes a warpgroup), the ring of A (a slab of a tile a stage, as many stages as fit, at
// most 8), the barriers, room to align the base to 1024 bytes.
template <int BN, int SLABS>
struct StreamRing {
  static constexpr int A_SLAB = kBM * kRowBytes, B_SLAB = BN * kRowBytes;
  static constexpr int B_BYTES = SLABS * B_SLAB;
  static constexpr int BOX_BYTES = 64 * kRowBytes, kBoxes = 4;
  static constexpr int OUT_BYTES = 2 * kBoxes * BOX_BYTES;
  static constexpr int FIT = (kMaxSharedBytes - 1024 - B_BYTES - OUT_BYTES - 256) / A_SLAB;
  static constexpr int STAGES = FIT < 8 ? FIT : 8;
  static constexpr int OUT_OFFSET = B_BYTES, RING_OFFSET = B_BYTES + OUT_BYTES,
                       BARRIER_OFFSET = RING_OFFSET + STAGES * A_SLAB;
  static constexpr int SMEM_BYTES = BARRIER_OFFSET + (2 * STAGES + 1) * 8 + 1024;
  static_assert(STAGES >= 4 && SMEM_BYTES <= kMaxSharedBytes, "the streaming ring fits");
};

// Warpgroup `consumer`'s 64 rows x BN columns of row tile `tile_m`, column tile `tile_n`, out
// through the TMA: per box of 128 bytes of columns (64 16-bit outputs, 32 f32 ones), the lanes
// write their fragments (rows 16w + l/4 and + 8, columns 8J + 2(l%4), + 1) as stored, chunk c
// of row r at c ^ (r % 8) (the 128B swizzle: the 8 rows of one store on distinct banks), then
// the warpgroup's lead thread stores the box. `boxes` counts the warpgroup's boxes (its buffer:
// boxes % kBoxes).
template <class E, int BN, int SLABS>
__device__ __forceinline__ void stream_store(const CUtensorMap* map_out, const StreamWork& work,
                                             int tile_m, int tile_n, int consumer,
                                             float (&acc)[BN / 2], uint32_t out_base, int& boxes) {
  using R = StreamRing<BN, SLABS>;
  constexpr bool kF32 = std::is_same_v<E, float>;
  constexpr int kColumnsPerBox = kRowBytes / (kF32 ? 4 : 2), kJPerBox = kColumnsPerBox / 8;
  const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  const bool lead = threadIdx.x % 128 == 0;
  const uint32_t row = uint32_t(16 * warp + lane / 4) * kRowBytes, swizzle = uint32_t(lane / 4);
#pragma unroll
  for (int b = 0; b < BN / kColumnsPerBox; ++b) {
    const int column0 = tile_n * BN + b * kColumnsPerBox;
    if (column0 >= work.columns) break;  // the same for the whole warpgroup
    const uint32_t box =
        out_base + uint32_t(consumer * R::kBoxes + boxes % R::kBoxes) * R::BOX_BYTES;
    ++boxes;
    if (lead) bulk_wait<R::kBoxes - 1, true>();  // the box's last store has read it
    warpgroup_sync(consumer);
#pragma unroll
    for (int j = 0; j < kJPerBox; ++j) {
      const int J = b * kJPerBox + j, column = column0 + 8 * j + 2 * (lane % 4);
      float v[4] = {acc[4 * J], acc[4 * J + 1], acc[4 * J + 2], acc[4 * J + 3]};
      if (work.bias != nullptr && column < work.columns) {
        const float b0 = work.bias[column], b1 = work.bias[column + 1];
        v[0] += b0, v[1] += b1, v[2] += b0, v[3] += b1;
      }
      if (work.relu) {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = fmaxf(v[i], 0.0f);
      }
      if constexpr (kF32) {
        const uint32_t chunk = uint32_t(2 * j + lane % 4 / 2);
        const uint32_t at = box + row + 16 * (chunk ^ swizzle) + 8 * uint32_t(lane % 2);
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(v[0]), "f"(v[1])
                     : "memory");
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at + 8 * kRowBytes), "f"(v[2]),
                     "f"(v[3])
                     : "memory");
      } else {
        const uint32_t at = box + row + 16 * (uint32_t(j) ^ swizzle) + 4 * uint32_t(lane % 4);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(E::pack(v[0], v[1])) : "memory");
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + 8 * kRowBytes), "r"(E::pack(v[2], v[3]))
                     : "memory");
      }
    }
    detail::fence_async_shared();  // the box's stores, seen by the TMA (async proxy)
    warpgroup_sync(consumer);
    if (lead) {
      tma_store_2d(map_out, box, column0, tile_m * kBM + consumer * 64);
      bulk_commit();
    }
  }
}

// The streaming kernel: one block an SM (288 threads: two consumer warpgroups and the producer
// warp), the reduction's rows.slabs() slabs (at most SLABS) against B resident, B_FROM_W as
// ConvProblem's (B is w itself, MN-major; else the flat K-major [columns, inner] matrix).
// map_out: the output [M, columns] in boxes of 128 bytes of columns x 64 rows, 128B-swizzled.
// The ring's i-th stage (counted over the block's tiles and their slabs) goes back once the
// wgmmas of slab i + 1 are issued and slab i's have retired, the tile's last once all have.
// Each accumulator sums its products in slab order: deterministic.
template <class E, int BN, int SLABS, bool B_FROM_W>
__global__ void __launch_bounds__(kBlockThreads, 1)
    stream_kernel(const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_out, const StreamWork work) {
  using R = StreamRing<BN, SLABS>;
  using Loads = ConvProblem<BN, DataOut<E>, 1, B_FROM_W>;  // B's boxes
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t base = raw_address + (1024 - raw_address % 1024) % 1024;
  const uint32_t out_base = base + R::OUT_OFFSET, ring = base + R::RING_OFFSET;
  const uint32_t full = base + R::BARRIER_OFFSET, empty = full + 8 * R::STAGES,
                 b_full = empty + 8 * R::STAGES;
  const int tile_n = int(blockIdx.x) % work.column_tiles;
  const int first_m = int(blockIdx.x) / work.column_tiles,
            step_m = int(gridDim.x) / work.column_tiles;
  const Rows& rows = work.rows;
  const int slabs = rows.slabs();

  const int tid = threadIdx.x;
  if (tid == kThreads) {
    prefetch_tensor_map(&map_a), prefetch_tensor_map(&map_b), prefetch_tensor_map(&map_out);
    for (int s = 0; s < R::STAGES; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, kThreads);
    }
    mbarrier_init(b_full, 1);
    fence_barrier_init();
  }
  __syncthreads();

  if (tid >= kThreads) {  // the producer warp: B once, then each tile's slabs of A
    if (tid != kThreads) return;
    mbarrier_arrive_expect_tx(b_full, uint32_t(slabs * R::B_SLAB));
    for (int s = 0; s < slabs; ++s) {
      Loads::load_b(rows, s, base + s * R::B_SLAB, b_full, &map_b, tile_n);
    }
    for (int m = first_m, i = 0; m < rows.tiles; m += step_m) {
      for (int s = 0; s < slabs; ++s, ++i) {
        const int stage = i % R::STAGES;
        if (i >= R::STAGES) mbarrier_wait(empty + 8 * stage, (i / R::STAGES - 1) & 1);
        mbarrier_arrive_expect_tx(full + 8 * stage, R::A_SLAB);
        rows.load(ring + stage * R::A_SLAB, &map_a, full + 8 * stage, s, m);
      }
    }
    return;
  }

  const int consumer = tid / 128;
  int boxes = 0;
  mbarrier_wait(b_full, 0);
  for (int m = first_m, first = 0; m < rows.tiles; m += step_m, first += slabs) {
    float acc[BN / 2];
#pragma unroll
    for (int a = 0; a < BN / 2; ++a) acc[a] = 0.0f;
    for (int s = 0; s < slabs; ++s) {
      const int i = first + s, stage = i % R::STAGES;
      mbarrier_wait(full + 8 * stage, (i / R::STAGES) & 1);
      detail::wgmma_fence();
      slab_mma<E, BN, false, B_FROM_W>(acc, ring + stage * R::A_SLAB + consumer * 8192,
                                       base + s * R::B_SLAB);
      detail::wgmma_commit();
      detail::wgmma_wait<1>();  // slab i-1's group has retired: its stage goes back
      if (s > 0) mbarrier_arrive(empty + 8 * ((i - 1) % R::STAGES));
    }
    detail::wgmma_wait<0>();
#pragma unroll
    for (int a = 0; a < BN / 2; ++a) detail::fence_register(acc[a]);
    mbarrier_arrive(empty + 8 * ((first + slabs - 1) % R::STAGES));
    stream_store<E, BN, SLABS>(&map_out, work, m, tile_n, consumer, acc, out_base, boxes);
  }
  if (tid % 128 == 0) bulk_wait<0, false>();  // the boxes stay until their stores are done
}

}  // namespace crema::kernels::cuda::tc::wg
