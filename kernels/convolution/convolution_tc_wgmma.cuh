// The wgmma + TMA machinery of the 16-bit convolutions on Hopper, and of the f32 ones in tf32 math
// (convolution_tc_wgmma_sm90a.cu: forward and backward data; convolution_tc_wgmma_filter_sm90a.cu:
// the filter gradient, 16-bit only), included by sm_90a files only (CMakeLists.txt builds
// *_sm90a.cu apart): the instructions, the stage ring and the one kernel all three passes run,
// each with its own Problem (which boxes fill a stage, what the epilogue does with the
// accumulators).
//
//   wgmma.mma_async m64nNk16 (N = 64 or 128; on f32 tensors in tf32 math m64nNk8), fp32
//   accumulation, operands in shared memory, 128B-swizzled, through 64-bit descriptors:
//   d += A * B^T, A 64 x 16, B N x 16 (x 8 in tf32). The accumulator
//   d is the warpgroup's 64 x N fp32 tile, N / 2 registers a thread: value 4j + i of warp w, lane l
//   is row 16w + l/4 + 8 (i/2), column 8j + 2 (l%4) + i%2 (PTX ISA, "wgmma register fragment D").
//   Inline asm must name every accumulator register: the operand lists are written out once per
//   shape and shared by the three types.
//   K-major operands (forward, data: channels are the inner index and contiguous): rows of 128
//   bytes = 64 16-bit channels or 32 f32 ones (a slab: MapType::slab()), chunk c of row r stored at
//   c ^ (r % 8), 8-row groups 1024 bytes apart; the k step (16 16-bit values, 8 tf32 ones) adds
//   32 bytes either way (gemm_wgmma_instructions.cuh's descriptor, t4's layout). tf32 has no
//   transpose immediates: f32 operands are K-major only (forward and data, not the filter).
//   MN-major operands (filter: the inner index N*P*Q is both tensors' outer index): the same rows,
//   each now 64 consecutive channels (M or N) of one inner index, swizzled alike; 8 inner indices
//   make a 1024-byte atom (stride byte offset 1024), the next 64 channels of the tile lie one box
//   further (leading byte offset: a 64 x 64 box, 8192 bytes), the k step adds 16 rows (2048
//   bytes); the instruction's transpose immediates say MN-major (PTX ISA, "Shared Memory Matrix
//   Layout": canonical MN-major 128B layout ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements).
//
//   mbarrier: a 64-bit shared-memory barrier counting arrivals and (for TMA) transaction bytes; a
//   phase completes when both reach what it expects, and waiters poll the phase's parity.
//   TMA: cp.async.bulk.tensor copies a box of a tensor map (a 2-D to 4-D view of global memory,
//   or, im2col mode, 64 output positions of a convolution; the maps: convolution_tc_wgmma_maps.cuh)
//   into shared memory, 128B-swizzled, zero-filling what lies outside the tensor, and completes
//   its bytes on an mbarrier (the full box's bytes, edges included). The same helpers as t4's
//   (kernels/gemm/gemm_wgmma_pipelined_sm90a.cu).
#pragma once

#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature; reached through cudart
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_gemm.cuh"
#include "kernels/convolution/convolution_tc_wgmma_maps.cuh"
#include "kernels/gemm/gemm_wgmma_instructions.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::tc::wg {

#define CREMA_ACC32(d)                                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define CREMA_ACC64(d)                                                                            \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (N / 2 values a thread) += A * B^T on the type E: Bf16 or F16 (k16), or float (f32 tensors
// in tf32 math, k8: the tensor cores read each fp32 word's top 19 bits, i.e. truncate to TF32);
// TRANS_A, TRANS_B: A, B MN-major in shared memory (the transpose immediates, 16-bit types only),
// else K-major.
template <class E, int TRANS_A = 0, int TRANS_B = TRANS_A>
__device__ __forceinline__ void mma_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  static_assert(!std::is_same_v<E, float> || (TRANS_A == 0 && TRANS_B == 0),
                "tf32 wgmma reads K-major operands only");
  if constexpr (std::is_same_v<E, float>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31}"
        ", %32, %33, p, 1, 1;\n}\n"
        : CREMA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(1));
  } else if constexpr (std::is_same_v<E, Bf16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31}"
        ", %32, %33, p, 1, 1, %35, %36;\n}\n"
        : CREMA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31}"
        ", %32, %33, p, 1, 1, %35, %36;\n}\n"
        : CREMA_ACC32(d)
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B));
  }
}
template <class E, int TRANS_A = 0, int TRANS_B = TRANS_A>
__device__ __forceinline__ void mma_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  static_assert(!std::is_same_v<E, float> || (TRANS_A == 0 && TRANS_B == 0),
                "tf32 wgmma reads K-major operands only");
  if constexpr (std::is_same_v<E, float>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,"
        "%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
        ", %64, %65, p, 1, 1;\n}\n"
        : CREMA_ACC64(d)
        : "l"(desc_a), "l"(desc_b), "r"(1));
  } else if constexpr (std::is_same_v<E, Bf16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,"
        "%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
        ", %64, %65, p, 1, 1, %67, %68;\n}\n"
        : CREMA_ACC64(d)
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,"
        "%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,"
        "%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
        ", %64, %65, p, 1, 1, %67, %68;\n}\n"
        : CREMA_ACC64(d)
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B));
  }
}

#undef CREMA_ACC32
#undef CREMA_ACC64

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives and announces `bytes` that asynchronous copies will deliver before the phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Waits until the phase of parity `parity` (0 for the barrier's 1st, 3rd, ... phase) completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}
// The initialized barriers made visible to the TMA unit (the async proxy) as well.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  detail::fence_async_shared();
}

// Fetches a tensor map (a __grid_constant__ parameter) into the TMA unit's descriptor cache ahead
// of the first copy through it, under the barriers' setup.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// The TMA unit copies the box at coordinates (c0, c1[, c2, c3]) of `map`, innermost first, to
// shared `dst` and completes its bytes on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// The im2col mode: the TMA walks `pixelsPerColumn` positions of an NHWC tensor's bounding box
// (corners set in the map) from position (w, h, n), w fastest, each position's pixel taken at
// (w + off_w, h + off_h), 128 bytes of channels from c (zeros outside the image), one 128-byte row
// a position. The offsets are 16-bit.
__device__ __forceinline__ void tma_load_im2col_4d(uint32_t dst, const CUtensorMap* map,
                                                   uint32_t bar, int c, int w, int h, int n,
                                                   uint16_t off_w, uint16_t off_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c), "r"(w), "r"(h), "r"(n), "h"(off_w),
      "h"(off_h)
      : "memory");
}

// Clusters: this block's rank in its cluster; the shared::cluster address of shared address
// `at` in block `rank` of the cluster (the same offset in its shared memory); a 16-byte load from
// there; the cluster's barrier (every non-exited thread of every block arrives, then waits),
// release/acquire: shared-memory writes before it are seen by the cluster's reads after it.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ uint32_t cluster_address(uint32_t at, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(at), "r"(rank));
  return out;
}
__device__ __forceinline__ float4 load_cluster_f4(uint32_t at) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(at)
               : "memory");
  return v;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// A descriptor of an MN-major 128B-swizzled operand: 8-row atoms of 1024 bytes, the next 64
// channels 8192 bytes on (one 64 x 64 box).
__device__ __forceinline__ uint64_t mn_major_descriptor(uint32_t smem_address) {
  return uint64_t((smem_address & 0x3FFFF) >> 4) | (uint64_t(8192 >> 4) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// One slab (128 bytes of inner indices: 4 k steps) into a warpgroup's 64 x BN accumulators, A's
// 64 rows at a_tile, B's BN rows (columns) at b_tile, each K-major (a k step 32 bytes on) or
// MN-major (MN_A, MN_B; 16-bit only: a k step 16 rows, 2048 bytes, on, 64-wide column groups one
// 64 x 64 box, 8192 bytes, apart). BN 256: two m64n128, B's second 128 columns 16 KB on either
// way.
template <class E, int BN, bool MN_A, bool MN_B>
__device__ __forceinline__ void slab_mma(float (&acc)[BN / 2], uint32_t a_tile, uint32_t b_tile) {
  constexpr int kA = MN_A ? 1 : 0, kB = MN_B ? 1 : 0;
  auto operand = [](bool mn_major, uint32_t at) {
    return mn_major ? mn_major_descriptor(at) : detail::descriptor(at);
  };
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint64_t a = operand(MN_A, a_tile + (MN_A ? 2048 : 32) * k);
    const uint32_t b_at = b_tile + (MN_B ? 2048 : 32) * k;
    const uint64_t b = operand(MN_B, b_at);
    if constexpr (BN == 64) {
      mma_n64<E, kA, kB>(acc, a, b);
    } else if constexpr (BN == 128) {
      mma_n128<E, kA, kB>(acc, a, b);
    } else {
      mma_n128<E, kA, kB>(*reinterpret_cast<float(*)[64]>(acc), a, b);
      mma_n128<E, kA, kB>(*reinterpret_cast<float(*)[64]>(acc + 64), a,
                          operand(MN_B, b_at + 16384));
    }
  }
}

// 256 consumer threads = 2 warpgroups, each 64 rows of a 128-row tile, and one producer warp
// after them: 288 threads a block. A slab is a 128-byte row of inner indices: kSlab = 64 16-bit
// ones (the filter gradient's), MapType::slab() for any type.
constexpr int kBM = 128, kSlab = 64, kThreads = 256, kBlockThreads = kThreads + 32;

// The epilogue's scratch: each of the 8 consumer warps parks its 16 rows of `columns` fp32 sums
// at a time, rows columns + 8 floats apart (the pad puts the 8 rows of one fragment store on
// distinct banks). Persistent blocks park 64 columns at a time in 36 KB of their own.
__host__ __device__ constexpr int staging_warp_floats(int columns) {
  return 16 * (columns + 8);
}
constexpr int kStagingBytes = kThreads / 32 * staging_warp_floats(64) * 4;
// The dynamic shared memory one block of an SM may have (227 KB on sm_90).
constexpr int kMaxSharedBytes = 227 * 1024;

// The shared-memory ring of a tile 128 x BN: stages of A (128 rows of 128 bytes) and B (BN rows).
// Launched a block a unit (RESIDENT 0), as many stages as fit 96 KB at BN 64 and 128 (4 and 3:
// two blocks an SM) or 192 KB at BN 256 (4 of 48 KB: one block an SM), the epilogue's scratch in
// the drained ring. Deep (RESIDENT kDeep): a block a unit too, but one block an SM with as many
// stages as fit the SM's shared memory (9 at BN 64, 7 at 128), for launches of at most a block an
// SM whose reductions are longer than the 96 KB ring: a lone block refills a stage only a load's
// latency after its slab's wgmmas, so a short ring waits on memory. Persistent, RESIDENT blocks an
// SM each walking many units, its producer filling the next unit's stages during this one's
// epilogue: the scratch has its own room after the barriers and the ring takes the rest of the
// SM's share (two, what the launches use: 3 stages at BN 64, 2 at 128; one, measured slower in
// session 18: 7 at BN 64, 5 at 128).
constexpr int kDeep = -1;
template <int BN_, int RESIDENT_ = 0>
struct Ring {
  static constexpr int BN = BN_, A_BYTES = kBM * kRowBytes, B_BYTES = BN * kRowBytes;
  static constexpr int RESIDENT = RESIDENT_;
  static constexpr bool PERSISTENT = RESIDENT > 0, DEEP = RESIDENT == kDeep;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int RING_BYTES =
      PERSISTENT ? ((kMaxSharedBytes + 1024) / RESIDENT - 2048 - kStagingBytes - 256) /
                       STAGE_BYTES * STAGE_BYTES
      : DEEP ? (kMaxSharedBytes - 1024 - 256) / STAGE_BYTES * STAGE_BYTES
             : (BN == 256 ? 192 : 96) * 1024;
  static constexpr int STAGES = RING_BYTES / STAGE_BYTES;
  // The columns the epilogue parks at once: all (in the drained ring) or 64 (persistent).
  static constexpr int STAGED = PERSISTENT ? 64 : BN;
  // The stages (1024-byte aligned, as the 128B swizzle needs), the full and empty barriers, the
  // scratch (PERSISTENT; else offset 0: the ring), and room to align the base.
  static constexpr int STAGING_OFFSET = PERSISTENT ? STAGES * STAGE_BYTES + 2 * STAGES * 8 : 0;
  static constexpr int SMEM_BYTES =
      STAGES * STAGE_BYTES + 2 * STAGES * 8 + (PERSISTENT ? kStagingBytes : 0) + 1024;
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma n64, n128 or two n128");
  static_assert(RESIDENT >= 0 || (DEEP && BN < 256), "deep rings at 64 and 128 columns");
  static_assert(STAGES >= 2 && STAGES <= 16 &&
                    (SMEM_BYTES + 1024) * (PERSISTENT ? RESIDENT : 1) <= kMaxSharedBytes + 1024,
                "the ring fits");
  static_assert(PERSISTENT || kThreads / 32 * staging_warp_floats(BN) * 4 <= STAGES * STAGE_BYTES,
                "the epilogue's scratch fits the ring");
  static_assert(STAGING_OFFSET % 16 == 0, "the scratch is 16-byte aligned");
};

// Waits until the 256 consumer threads (warpgroups 0 and 1) all arrived: named barrier 1, the
// producer warp not counted (it has returned).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

// The block's units, each as body(unit, first) -> first + its slabs (`first`: the slabs of the
// block's earlier units, which fix the stages and phases): blockIdx.x alone from a literal 0 where
// a block takes one unit (RESIDENT 0 or kDeep: the compiler folds the count away), else
// blockIdx.x, + gridDim.x, ... carrying the count.
template <int RESIDENT, class Problem, class Body>
__device__ __forceinline__ void walk_units(const Problem& problem, const Body& body) {
  if constexpr (RESIDENT <= 0) {
    body(int(blockIdx.x), 0);
  } else {
    for (int unit = blockIdx.x, first = 0; unit < problem.units(); unit += gridDim.x) {
      first = body(unit, first);
    }
  }
}

// The kernel of all three passes: 128 x BN tiles of a GEMM over `slabs` slabs of 128 bytes of
// inner indices (64 16-bit ones, 32 f32 ones), one a block (RESIDENT 0: the grid has a block for
// every unit) or many (RESIDENT blocks an SM, each taking units blockIdx.x, + gridDim.x, ...).
// Problem provides
//   kMnMajorA, kMnMajorB           whether A, B are MN-major (else K-major; slab_mma)
//   kTransposes, transpose(stage, warp, lane)   whether the consumers rewrite each stage before
//                                  its wgmmas (the f32 filter gradient: MN-major boxes made K-major
//                                  in place, convolution_tc_wgmma_filter.cuh), each warp its
//                                  part; the kernel then fences the stores for the async proxy
//                                  and syncs the 256 consumers
//   int units()                    the units of work: a tile and its part of the reduction
//   Where locate(unit)             where unit `unit` works, computed once a unit
//   int slabs(where)
//   fill(where, slab, stage, bar, map_a, map_b)   one thread: announce the stage's bytes on `bar`
//                                  and ask the TMA for slab `slab` of A (128 rows at `stage`) and
//                                  B (BN rows at stage + A_BYTES)
//   store<STAGED>(where, consumer, acc, staging)   the epilogue of warpgroup `consumer`'s 64 x BN
//                                  accumulators (threads 128 consumer ..); staging: the warp's
//                                  fp32 scratch, staging_warp_floats(STAGED) (16 rows of STAGED
//                                  columns at a time), that no other warp touches
// Warp-specialized: lane 0 of warp 8, the producer, fills the units' slabs in order, the i-th
// (counted over all of the block's units) into stage i % STAGES once its last tenant (slab
// i - STAGES) was released: it runs ahead into the next unit while the consumers finish this
// one. The consumers (warpgroups 0 and 1) wait on a stage's "full" barrier, issue its wgmmas,
// keep one slab's group in flight, and release the previous slab's stage on its "empty" barrier
// once that group retired (a unit's last stage once all retired). The producer must not sit in
// the consumers' loop: ptxas then serializes the wgmmas (its warning C7515; session 17 found
// every consumer-side producer build of this kernel so). BN 256 (two m64n128 a k step, 128
// accumulators a thread: acc[64 h + 4 j + i] is column 128 h + 8 j + ..., i.e. acc[4 J + i] is
// column 8 J + ... for every BN, the layout every store reads) runs one block an SM, BN 64 and
// 128 two (or RESIDENT, persistent). Each accumulator sums its products in slab order:
// deterministic.
template <class E, int BN, class Problem, int RESIDENT>
__global__ void __launch_bounds__(kBlockThreads, RESIDENT > 0                     ? RESIDENT
                                                 : BN == 256 || RESIDENT == kDeep ? 1
                                                                                  : 2)
    wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                 const __grid_constant__ CUtensorMap map_b,
                 const __grid_constant__ Problem problem) {
  static_assert(BN < 256 || !Problem::kMnMajorA, "the 256-column tile reads A K-major");
  static_assert(!Problem::kTransposes || RESIDENT == 0, "transposing Problems: a block a unit");
  using R = Ring<BN, RESIDENT>;
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t base = raw_address + (1024 - raw_address % 1024) % 1024;
  const uint32_t full = base + R::STAGES * R::STAGE_BYTES, empty = full + 8 * R::STAGES;

  const int tid = threadIdx.x;
  if (tid == kThreads) {
    prefetch_tensor_map(&map_a), prefetch_tensor_map(&map_b);
    for (int s = 0; s < R::STAGES; ++s) {
      mbarrier_init(full + 8 * s, 1);          // the producer's arrive; the TMA bytes complete it
      mbarrier_init(empty + 8 * s, kThreads);  // every consumer thread
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (tid >= kThreads) {  // the producer warp
    if (tid != kThreads) return;
    // Unit `unit`'s slabs, the first the block's `first`-th (counted over all of its units).
    auto produce = [&](int unit, int first) {
      const auto where = problem.locate(unit);
      const int slabs = problem.slabs(where);
      for (int s = 0; s < slabs; ++s) {
        const int i = first + s, stage = i % R::STAGES;
        // Slab i - STAGES, the stage's previous tenant, released by both consumers.
        if (i >= R::STAGES) mbarrier_wait(empty + 8 * stage, (i / R::STAGES - 1) & 1);
        problem.fill(where, s, base + stage * R::STAGE_BYTES, full + 8 * stage, &map_a, &map_b);
      }
      return first + slabs;
    };
    walk_units<RESIDENT>(problem, produce);
    return;
  }

  const int consumer = tid / 128;
  float* staging = reinterpret_cast<float*>(raw_smem + (base - raw_address) + R::STAGING_OFFSET) +
                   (tid / 32) * staging_warp_floats(R::STAGED);
  auto consume = [&](int unit, int first) {
    const auto where = problem.locate(unit);
    const int slabs = problem.slabs(where);
    float acc[BN / 2];
#pragma unroll
    for (int a = 0; a < BN / 2; ++a) acc[a] = 0.0f;
    for (int s = 0; s < slabs; ++s) {
      const int i = first + s, stage = i % R::STAGES;
      mbarrier_wait(full + 8 * stage, (i / R::STAGES) & 1);
      if constexpr (Problem::kTransposes) {
        problem.transpose(raw_smem + (base - raw_address) + stage * R::STAGE_BYTES, tid / 32,
                          tid % 32);
        detail::fence_async_shared();  // the stores, seen by the wgmmas' reads (async proxy)
        consumers_sync();              // every warp's part of the stage
      }
      // The warpgroup's 64 rows of A: 64 rows of 128 bytes (K-major) or the second 64 x 64 box
      // (MN-major): 8192 bytes on either way.
      const uint32_t a_tile = base + stage * R::STAGE_BYTES + consumer * 8192;
      const uint32_t b_tile = base + stage * R::STAGE_BYTES + R::A_BYTES;
      detail::wgmma_fence();
      slab_mma<E, BN, Problem::kMnMajorA, Problem::kMnMajorB>(acc, a_tile, b_tile);
      detail::wgmma_commit();
      if constexpr (Problem::kTransposes) {
        // The slab's wgmmas retire before the next slab's transposes (ptxas serializes wgmmas
        // that other work runs under: C7515); the SM's other block keeps the tensor cores busy.
        detail::wgmma_wait<0>();
        mbarrier_arrive(empty + 8 * stage);
      } else {
        detail::wgmma_wait<1>();  // slab i-1's group has retired: its stage goes back
        if (s > 0) mbarrier_arrive(empty + 8 * ((i - 1) % R::STAGES));
      }
    }
    detail::wgmma_wait<0>();
#pragma unroll
    for (int a = 0; a < BN / 2; ++a) detail::fence_register(acc[a]);
    if constexpr (R::PERSISTENT) {
      // The unit's last stage goes back (a block a unit: nobody waits for it). Each warp's
      // scratch is its own.
      if (slabs > 0) mbarrier_arrive(empty + 8 * ((first + slabs - 1) % R::STAGES));
    } else {
      // The scratch is the ring, free once both consumers are here (every TMA copy has landed:
      // each consumer waited on every slab's "full"; the other may still be reading the last
      // stage).
      consumers_sync();
    }
    problem.template store<R::STAGED>(where, consumer, acc, staging);
    return first + slabs;
  };
  walk_units<RESIDENT>(problem, consume);
}

}  // namespace crema::kernels::cuda::tc::wg
