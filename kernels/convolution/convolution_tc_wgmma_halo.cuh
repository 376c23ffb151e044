// Halo tiles: the wgmma forward and backward data of a stride-1 filter with taps (3x3, 5x5, ...)
// reading each input pixel of a tile once a channel slab instead of once a tap. The ring kernel
// (convolution_tc_wgmma.cuh) asks the TMA for A's 128 rows again for every tap, shifted by the
// tap's offset: a 3x3 moves 9 times the tile's input through L2 and, at 64 channels, more bytes
// than the tensor cores can use (session 18's ncu: crema's and cuDNN's 3x3 64->64 kernels both
// move ~6.2 TB/s from L2; cuDNN moves a third less). Here a tile is box_p whole output rows of
// one image, and its A for every tap comes from one box of the input, the halo: box_p +
// (R - 1) |step_h| input rows of `pitch` = Q + (S - 1) |step_w| pixels, the TMA zero-filling
// what lies outside the image (the padding), stored as rows of 128 bytes in order. GEMM row i
// (output row i / pitch, column i % pitch of the tile) is then, for tap (r, s), halo row
// i + shift0 + r shift_h + s shift_w: each tap's A is the halo's rows from a shifted start (a
// wgmma descriptor may start at any 128-byte row of a 128B-swizzled K-major layout: the swizzle
// follows the address bits, as the TMA writes it; session 19's probe checked 13 shifts from 0 to
// 127). Rows q >= Q of an output row (the pitch's extra S - 1 columns) hold sums across the row's
// edge and are never stored (Rows::at). Wide rows cost tile rows: at 56 x 56 two rows of 58 of a
// 128 tile (112 useful, as the ring kernel's), at 14 x 14 eight rows of 16 (112, against 126).
//
//   forward  step +dilation: tap (r, s) reads x at (p + base_h + dil_h r, q + base_w + dil_w s)
//   data     stride 1, one phase: tap (r, s) reads dy at (i + offset_h - dil_h r, ...): step
//            -dilation, the halo's corner at the last tap's offset
//
// Per tile the producer walks the channel slabs c (the halo of c into one of `slots` halo slots:
// two where the reduction has more than one slab, so that c + 1's halo lands while c's taps run)
// and, for each, the taps (B's rows of that tap and slab into the stage ring, as the ring
// kernel's). The consumers wait on a halo once, then on each tap's B stage, and release a halo
// slot with its last tap's stage once the next tap's group is issued (so more than one slab needs
// two slots: with one, the next slab's halo would wait for a release that waits for it). One
// block a tile, three an SM at 64 columns where they fit (halo_blocks), else two; the epilogue is
// ConvProblem's (the scratch in the drained smem). sm_90a files only, as convolution_tc_wgmma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/convolution_tc_wgmma_conv.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc::wg {

// A tile's halo box and the shared memory it lays out: `slots` halo slots of slot_bytes, then
// `stages` B stages of BN rows.
struct Halo {
  int per_sm;                    // the blocks an SM whose share of shared memory it takes
  int pitch, rows;               // the box: `rows` input rows of `pitch` pixels
  int h0, w0;                    // its corner against the tile's first output row and column 0
  int R, S;                      // taps: rows, columns
  int shift0, shift_h, shift_w;  // tap (r, s)'s A starts at halo row shift0 + r shift_h + s shift_w
  int box_bytes;                 // what the TMA delivers a halo: rows * pitch rows of 128 bytes
  int slot_bytes;                // a slot: the box, or the rows the last tap's wgmmas read (1024 B
                                 // units: the 128B swizzle's atom)
  int slots, stages;
  int smem_bytes;  // the slots, the stages, their barriers, 1024 to align the base
};

// The slots and stages of one of `per_sm` blocks an SM: its share of the SM's 228 KB, less the
// 1 KB the runtime reserves a block, the base's alignment and room for the barriers.
constexpr int halo_budget(int per_sm) {
  return (kMaxSharedBytes + 1024) / per_sm - 1024 - 1024 - 512;
}

// The tiles of a halo over `rows` (a filter with taps at stride 1: forward_rows or phase_rows):
// box_p = 128 / pitch output rows of one image a tile, or, where a padded row is wider than a tile
// (224 x 224 images), one row a tile cut into `segments` pieces of segment_q pixels, as even as
// they come (224: two of 112, pitch 114). Returns box_p 0 where no halo fits (a filter wider
// than a tile, or a box past the TMA's 256 a dimension).
inline Rows halo_rows(Rows rows) {
  const int reach_w = std::abs(rows.step_w) * (rows.S - 1);
  const int taps_h = rows.taps / rows.S;
  if (reach_w >= kBM || std::abs(rows.step_h) * (taps_h - 1) + 1 > 256) {
    rows.box_p = 0;
    return rows;
  }
  rows.segments = (rows.Q + reach_w + kBM - 1) / kBM;
  if (rows.segments > 1) rows.segments = (rows.Q + kBM - reach_w - 1) / (kBM - reach_w);
  rows.segment_q = (rows.Q + rows.segments - 1) / rows.segments;
  rows.pitch = rows.segment_q + reach_w;
  rows.box_p = rows.segments > 1 ? 1 : std::min(kBM / rows.pitch, rows.P), rows.box_n = 1;
  rows.tiles_per_image = (rows.P + rows.box_p - 1) / rows.box_p * rows.segments;
  rows.tiles = rows.images * rows.tiles_per_image;
  return rows;
}

// The halo of `rows` (halo_rows's, halo_fits) at BN columns, `per_sm` blocks an SM.
inline Halo halo_of(const Rows& rows, int bn, int per_sm = 2) {
  const int budget = halo_budget(per_sm);
  Halo h{};
  h.per_sm = per_sm;
  h.R = rows.taps / rows.S, h.S = rows.S, h.pitch = rows.pitch;
  const int reach_h = std::abs(rows.step_h) * (h.R - 1),
            reach_w = std::abs(rows.step_w) * (h.S - 1);
  h.rows = rows.box_p + reach_h;
  // The corner: the lowest tap offset (the last tap's where the step is negative).
  h.h0 = rows.base_h + std::min(0, rows.step_h * (h.R - 1));
  h.w0 = rows.base_w + std::min(0, rows.step_w * (h.S - 1));
  h.shift_h = rows.step_h * h.pitch, h.shift_w = rows.step_w;
  h.shift0 = -std::min(0, rows.step_h * (h.R - 1)) * h.pitch - std::min(0, rows.step_w * (h.S - 1));
  h.box_bytes = h.rows * h.pitch * kRowBytes;
  const int read_rows = reach_h * h.pitch + reach_w + kBM;  // the farthest tap's 128 rows
  h.slot_bytes = (std::max(h.rows * h.pitch, read_rows) * kRowBytes + 1023) / 1024 * 1024;
  const int b_bytes = bn * kRowBytes;
  // Two slots where there are two channel slabs and 3 B stages still fit, else one (the kernel
  // then drains its wgmmas at each slab's last tap: the next slab's halo lands in the same slot;
  // against the ring kernel, VGG's 128 -> 128 at 112 x 112 batch 8, forward 0.0781 -> 0.0626 ms,
  // data 0.0827 -> 0.0673, H200, 2026-11-29, session 29, call 6, `crema bench conv-tc`).
  h.slots = rows.channel_slabs > 1 && 2 * h.slot_bytes + 3 * b_bytes <= budget ? 2 : 1;
  h.stages = std::min(16, (budget - h.slots * h.slot_bytes) / b_bytes);
  h.smem_bytes = h.slots * h.slot_bytes + h.stages * b_bytes + 2 * 8 * (h.stages + h.slots) + 1024;
  return h;
}

// Whether halo tiles fit `rows` (halo_rows's) at BN columns, `per_sm` blocks an SM: they fill
// at least 96 of 128 rows, the box is at most 256 rows, a slot and 2 stages fit, and so does the
// epilogue's scratch.
inline bool halo_fits(const Rows& rows, int bn, int per_sm = 2) {
  if (rows.box_p == 0 || rows.box_p * rows.segment_q < 96) return false;
  const Halo h = halo_of(rows, bn, per_sm);
  return h.rows <= 256 && h.stages >= 2 &&
         kThreads / 32 * staging_warp_floats(bn) * 4 <=
             h.slots * h.slot_bytes + h.stages * bn * kRowBytes;
}

// The blocks an SM halo tiles over `rows` run at BN columns (halo_fits at two): three at 64
// columns where they fit with 3 stages of B (the kernel then at most 72 registers a thread),
// else two (and two where three would leave one slot for several slabs: that drain is
// unmeasured at three). H200, 2026-11-29 (session 24), `crema bench conv-tc --version
// tc_bf16_wgmma_halo`, batch 64, 3x3 64->64 at 56 x 56, ms: call 5, two persistent blocks an SM /
// three a block a tile, forward 0.0514 / 0.0483, data 0.0549 / 0.0509; call 7, session 23's two a
// block a tile (before the rows without divisions) / three, 0.0573 / 0.0461, 0.0602 / 0.0483.
inline int halo_blocks(const Rows& rows, int bn) {
  if (bn != 64 || !halo_fits(rows, bn, 3)) return 2;
  const Halo three = halo_of(rows, bn, 3);
  return three.stages >= 3 && (three.slots == 2 || rows.channel_slabs == 1) ? 3 : 2;
}

// The halo's map over an NHWC tensor [N, height, width, channels]: boxes of a slab's channels x
// pitch pixels x rows rows of one image.
inline CUtensorMap halo_map(MapType type, const void* base, int64_t N, int64_t height,
                            int64_t width, int64_t channels, const Halo& h) {
  const int64_t e = type.bytes;
  const cuuint64_t dims[4] = {cuuint64_t(channels), cuuint64_t(width), cuuint64_t(height),
                              cuuint64_t(N)};
  const cuuint64_t strides[3] = {cuuint64_t(channels * e), cuuint64_t(width * channels * e),
                                 cuuint64_t(height * width * channels * e)};
  const cuuint32_t box[4] = {cuuint32_t(type.slab()), cuuint32_t(h.pitch), cuuint32_t(h.rows), 1};
  return tensor_map(type, base, 4, dims, strides, box);
}

// The halo kernel: ConvProblem's units (one a block, one part, one phase), B loads and epilogue, A
// from the halo slots, B through the stage ring. map_a: halo_map; map_b: B's [columns, inner]
// matrix in boxes of BN rows, or (ConvProblem's B_FROM_W) w's filter_map. Each accumulator sums its
// products in (slab, tap) order: deterministic (not the ring kernel's order, tap outermost: the two
// differ in rounding). ONE_SLOT: one halo slot for several channel slabs (halo_of), each slab's
// last tap draining the wgmmas (a kernel of its own: the test in the two-slot kernel's loop cost
// its 3x3s 2-5%, H200, 2026-11-29, session 29, call 6).
template <class E, int BN, class Problem, int PER_SM, bool ONE_SLOT = false>
__global__ void __launch_bounds__(kBlockThreads, PER_SM)
    halo_kernel(const __grid_constant__ CUtensorMap map_a,
                const __grid_constant__ CUtensorMap map_b, const __grid_constant__ Problem problem,
                const __grid_constant__ Halo halo) {
  constexpr int kBBytes = BN * kRowBytes;
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t base = raw_address + (1024 - raw_address % 1024) % 1024;
  const uint32_t stages = base + halo.slots * halo.slot_bytes;
  const uint32_t full = stages + halo.stages * kBBytes, empty = full + 8 * halo.stages;
  const uint32_t halo_full = empty + 8 * halo.stages, halo_empty = halo_full + 8 * halo.slots;

  const int tid = threadIdx.x;
  if (tid == kThreads) {
    prefetch_tensor_map(&map_a), prefetch_tensor_map(&map_b);
    for (int s = 0; s < halo.stages; ++s) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, kThreads);
    }
    for (int s = 0; s < halo.slots; ++s) {
      mbarrier_init(halo_full + 8 * s, 1);
      mbarrier_init(halo_empty + 8 * s, kThreads);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const Rows& rows = problem.rows_of[0];
  const Place where = problem.locate(int(blockIdx.x));
  const int channel_slabs = rows.channel_slabs, taps = halo.R * halo.S;

  if (tid >= kThreads) {  // the producer warp
    if (tid != kThreads) return;
    const int n = where.tile.m / rows.tiles_per_image, t = where.tile.m % rows.tiles_per_image;
    const int p0 = t / rows.segments * rows.box_p, q0 = t % rows.segments * rows.segment_q;
    int stage = 0, round = 0, i = 0;
    for (int c = 0; c < channel_slabs; ++c) {
      const int slot = c % halo.slots;
      // Slab c - slots, the slot's previous tenant, released by every consumer thread.
      if (c >= halo.slots) mbarrier_wait(halo_empty + 8 * slot, (c / halo.slots - 1) & 1);
      mbarrier_arrive_expect_tx(halo_full + 8 * slot, halo.box_bytes);
      tma_load_4d(base + slot * halo.slot_bytes, &map_a, halo_full + 8 * slot, c * rows.slab,
                  q0 + halo.w0, p0 + halo.h0, n);
      for (int tap = 0; tap < taps; ++tap, ++i) {
        if (i >= halo.stages) mbarrier_wait(empty + 8 * stage, round ^ 1);
        mbarrier_arrive_expect_tx(full + 8 * stage, kBBytes);
        problem.load_b(rows, tap, c, stages + stage * kBBytes, full + 8 * stage, &map_b,
                       where.tile.n);
        if (++stage == halo.stages) stage = 0, round ^= 1;
      }
    }
    return;
  }

  const int consumer = tid / 128;
  // The zeros behind a register fence each: without it ptxas serialized the taps' wgmmas (its
  // C7515, "non wgmma instructions defining accumulator registers") once ConvProblem::store lost
  // its split branch (session 25: 37 -> 51 us for 8 x 512 x 14 x 14 -> 512 under ncu).
  float acc[BN / 2];
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) acc[a] = 0.0f, detail::fence_register(acc[a]);
  int stage = 0, round = 0;
  int held = -1;       // the stage of the slab whose group may still run (-1: none)
  int held_slot = -1;  // the halo slot that slab ended (-1: it was not a slab's last tap)
  for (int c = 0; c < channel_slabs; ++c) {
    const int slot = c % halo.slots;
    mbarrier_wait(halo_full + 8 * slot, (c / halo.slots) & 1);
    // The warpgroup's 64 rows: 64 rows on from the tile's first.
    const uint32_t a_first =
        base + slot * halo.slot_bytes + (consumer * 64 + halo.shift0) * kRowBytes;
    for (int r = 0; r < halo.R; ++r) {
      for (int s = 0; s < halo.S; ++s) {
        mbarrier_wait(full + 8 * stage, round);
        const uint32_t a_tile = a_first + (r * halo.shift_h + s * halo.shift_w) * kRowBytes;
        const uint32_t b_tile = stages + stage * kBBytes;
        detail::wgmma_fence();
        slab_mma<E, BN, false, Problem::kMnMajorB>(acc, a_tile, b_tile);
        detail::wgmma_commit();
        const bool last_tap = r == halo.R - 1 && s == halo.S - 1;
        if (ONE_SLOT && last_tap && c + 1 < channel_slabs) {
          // One slot: the next slab's halo lands where this one's is read, so every group
          // retires and the slot goes back now (waiting a tap, as below, would wait on itself).
          detail::wgmma_wait<0>();
          if (held >= 0) mbarrier_arrive(empty + 8 * held);
          mbarrier_arrive(empty + 8 * stage);
          mbarrier_arrive(halo_empty + 8 * slot);
          held = -1, held_slot = -1;
        } else {
          detail::wgmma_wait<1>();  // the previous slab's group has retired: its stage goes back
          if (held >= 0) mbarrier_arrive(empty + 8 * held);
          if (held_slot >= 0) mbarrier_arrive(halo_empty + 8 * held_slot);
          held = stage;
          held_slot = last_tap ? slot : -1;
        }
        if (++stage == halo.stages) stage = 0, round ^= 1;
      }
    }
  }
  detail::wgmma_wait<0>();
#pragma unroll
  for (int a = 0; a < BN / 2; ++a) detail::fence_register(acc[a]);
  // The scratch is the slots and the ring, free once both consumers are here (each waited on
  // every copy).
  consumers_sync();
  float* staging = reinterpret_cast<float*>(raw_smem + (base - raw_address)) +
                   (tid / 32) * staging_warp_floats(BN);
  problem.template store<BN, true>(where, consumer, acc, staging);
}

// Launches a block a tile, halo.per_sm an SM (2, or 3 at 64 columns: halo_blocks).
template <class E, int BN, class Problem>
void launch_halo(const CUtensorMap& map_a, const CUtensorMap& map_b, const Problem& problem,
                 const Halo& halo, int64_t blocks, gpu::Stream stream, const char* what) {
  static_assert(BN == 64 || BN == 128, "halo tiles: n64 or n128");
  auto go = [&](auto kernel) {
    detail::set_shared_memory_limit(kernel, halo.smem_bytes, what);
    kernel<<<unsigned(blocks), kBlockThreads, halo.smem_bytes, stream>>>(map_a, map_b, problem,
                                                                         halo);
    gpu::check_launch(what);
  };
  if constexpr (BN == 64) {  // three an SM: never one slot for several slabs (halo_blocks)
    if (halo.per_sm == 3) return go(halo_kernel<E, BN, Problem, 3>);
  }
  if (halo.slots == 1 && problem.rows_of[0].channel_slabs > 1) {
    return go(halo_kernel<E, BN, Problem, 2, true>);
  }
  go(halo_kernel<E, BN, Problem, 2>);
}

}  // namespace crema::kernels::cuda::tc::wg
