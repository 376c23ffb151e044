// t4 wgmma_pipelined: t3's wgmma, with the operands written into shared memory by the copy engine
// (TMA) instead of by the threads: no register pass, several slabs in flight. TF32 on fp32
// operands (cuda::sgemm) or bf16 / f16 operands in memory (cuda::gemm_bf16, cuda::gemm_16bit and
// t5); TF32 NT only (both operands K-major: t5, gemm_wgmma_repacked_sm90a.cu, repacks the
// others). For cuda::gemm_16bit the store also writes a bf16 or f16 C (rounded once) and adds a
// bias per column, a grid of several block rows splits K (each row's slabs summed into its own
// fp32 part, gemm_16bit_cuda.cu adds the parts in order), and either 16-bit operand may be
// MN-major (A stored [K,M], B stored [K,N]), read in place (below). This file is compiled for
// sm_90a alone (CMakeLists.txt).
//
//   block tile 128 x 256, k slab 128 bytes (32 floats or 64 bf16: one 128-byte swizzle row);
//   4 shared stages of 48 KB
//   384 threads = 3 warpgroups, specialized:
//     warpgroup 0, the producer: one thread waits until a stage is empty, then asks the TMA unit
//       for slab s of A (128 rows) and of B (256 rows) with one cp.async.bulk.tensor each; the
//       unit writes them 128B-swizzled (the layout the descriptors describe) and signals the
//       stage's "full" mbarrier by the bytes it delivered (zero-filled past the matrix edges)
//     warpgroups 1, 2, the consumers: each waits on "full", issues 8 wgmma m64n128 (its 64 rows
//       of A times the two 128-row halves of B, 4 k steps), keeps one group in flight, and
//       releases the previous slab's stage on its "empty" mbarrier once that group is done
//   setmaxnreg moves registers from the producer (40) to the consumers (232): 128 accumulators
//   persistent grid (wgmma_in_place): one block per SM walks tiles blockIdx.x + i * gridDim.x;
//     the ring runs on across tiles (a block's slabs counted from its first tile), and the
//     consumers release a tile's last stage before storing it, so the producer loads the next
//     tile's first slabs during the store (a short K, ConvNeXt's K = 96 to 768, is mostly
//     those). One tile per block otherwise (the grid of t4, t5 and the split of K).
//
// MN-major 16-bit operands (wgmma_in_place): wgmma reads a 16-bit operand MN-major when its
// transpose immediate is 1, so an operand stored [K, M or N] is read as it lies. Its tensor map's
// inner dimension is M (or N): one box is 64 m x 64 k, 64 rows of 128 bytes (one k each),
// 128B-swizzled: a column of 8 swizzle atoms, 8 KB. A's 128 rows are 2 such boxes side by side,
// B's 256 are 4, each at its own 8 KB (the same 16 + 32 KB a stage holds K-major), and the
// descriptor steps 8 KB from one 64-wide column to the next (descriptor_mn_major). A k16 step is
// 16 rows down the column (2048 bytes), whole atoms: no offset inside a swizzle row. A box wholly
// past M (or N) is not loaded (the stage's expected bytes leave it out): its rows of A (columns of
// B) feed only rows (columns) of C that are not stored.
//
// Math: the tensor cores read a TF32 operand from an fp32 word and ignore its 13 low mantissa bits,
// so operands are truncated toward zero to TF32 (as cuBLAS's TF32 mode is understood to), not
// rounded to nearest as in t1/t3, whose register pass rounds with cvt.rna. Rounding would need that
// pass back. bf16 operands are multiplied as stored.
//
// What fits: A not transposed and B transposed (NT; for 16-bit operands any layout), A and B
// 16-byte aligned, lda and ldb multiples of 4 (TF32) or 8 (16-bit): a tensor map's row stride is a
// multiple of 16 bytes. Any M, N, K otherwise: the TMA unit zero-fills rows and k past the edges.
// Any other TF32 call runs t3 (t5 repacks it first); gemm_bf16 repacks or refuses a bf16 call that
// does not fit.
#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's signature; reached through cudart
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_elem.cuh"
#include "kernels/gemm/gemm_wgmma_instructions.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

constexpr int kBM = 128, kBN = 256, kRowBytes = 128, kStages = 4;
// k per slab: one 128-byte row of 4-byte (TF32) or 2-byte (bf16, f16) elements.
template <Elem IN>
constexpr int kBK = IN == Elem::f32 ? 32 : 64;
static_assert(kBK<Elem::bf16> == kWgmma16SlabK && kBM == kWgmmaTileM && kBN == kWgmmaTileN);
constexpr int kConsumers = 2, kThreads = 128 * (1 + kConsumers);
constexpr int kABytes = kBM * kRowBytes, kBBytes = kBN * kRowBytes;
constexpr int kStageBytes = kABytes + kBBytes;
// An MN-major box: 64 m (or n) of 2 bytes x 64 k rows; A has kBM / 64 of them, B kBN / 64.
constexpr int kMnBox = 64, kMnBoxBytes = kMnBox * kRowBytes;
static_assert(kBK<Elem::bf16> * kRowBytes == kMnBoxBytes && kMnBox * 2 == kRowBytes);
// The stages (1024-byte aligned, as the 128B swizzle needs), then the full and empty mbarriers;
// + 1024 of room to align the base.
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kStages * 8 + 1024;

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
// The TMA unit copies the box at (inner, outer) of `map` to shared `dst` and completes its bytes
// on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(inner), "r"(outer)
      : "memory");
}
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
template <int REGISTERS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}

// C's element at (m, n), n + 1 too: alpha * v + bias[n] + beta * C (beta == 0: C is not read), in
// fp32, rounded once (to nearest even) into a 16-bit C; the pair in one 32-bit store where
// aligned.
template <Elem OUT>
__device__ __forceinline__ void store_out(void* C, int64_t ldc, int m, int n, int N, float alpha,
                                          float beta, const float* __restrict__ bias, float v0,
                                          float v1) {
  if constexpr (OUT == Elem::f32) {
    if (bias == nullptr)
      return store_pair(static_cast<float*>(C), ldc, m, n, N, alpha, beta, v0, v1);
  }
  if (n >= N) return;
  const bool second = n + 1 < N;
  float r0 = alpha * v0, r1 = alpha * v1;
  if (bias != nullptr) {
    r0 += bias[n];
    if (second) r1 += bias[n + 1];
  }
  if constexpr (OUT == Elem::f32) {
    float* c = static_cast<float*>(C) + m * ldc + n;
    c[0] = beta == 0.0f ? r0 : r0 + beta * c[0];
    if (second) c[1] = beta == 0.0f ? r1 : r1 + beta * c[1];
  } else {
    uint16_t* c = static_cast<uint16_t*>(C) + m * ldc + n;
    if (beta != 0.0f) {
      r0 += beta * widen<OUT>(c[0]);
      if (second) r1 += beta * widen<OUT>(c[1]);
    }
    if (second && reinterpret_cast<uintptr_t>(c) % 4 == 0) {
      *reinterpret_cast<uint32_t*>(c) =
          uint32_t(narrow<OUT>(r0)) | uint32_t(narrow<OUT>(r1)) << 16;
    } else {
      c[0] = narrow<OUT>(r0);
      if (second) c[1] = narrow<OUT>(r1);
    }
  }
}

// One block: 128 x 256 tiles of C (blockIdx.x, blockIdx.x + gridDim.x, ...: one per block, or
// several in a persistent grid), each over slabs [y * slabs_per_split, ...) of k (y = blockIdx.y;
// all of them without a split), its output at C + y * split_stride elements. A_MN, B_MN: that
// operand's map is MN-major (16-bit operands only).
template <Elem IN, Elem OUT, bool A_MN = false, bool B_MN = false>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_pipelined_kernel(const __grid_constant__ CUtensorMap map_a,
                                const __grid_constant__ CUtensorMap map_b, int M, int N, int K,
                                float alpha, float beta, void* __restrict__ C_base, int64_t ldc,
                                const float* __restrict__ bias, int slabs_per_split,
                                int64_t split_stride) {
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  const uint32_t base = raw_address + (1024 - raw_address % 1024) % 1024;
  const uint32_t full = base + kStages * kStageBytes, empty = full + 8 * kStages;

  const int tid = threadIdx.x, warpgroup = tid / 128;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);  // the producer's arrive; the TMA bytes complete it
      mbarrier_init(empty + 8 * s, kConsumers * 128);
    }
    // The initialized barriers made visible to the TMA unit (the async proxy) as well.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    fence_async_shared();
  }
  __syncthreads();

  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  const int tiles = tiles_m * tiles_n;
  const int all_slabs = (K + kBK<IN> - 1) / kBK<IN>;
  const int first_slab = int(blockIdx.y) * slabs_per_split;
  const int slabs = min(all_slabs - first_slab, slabs_per_split);  // >= 1: the plan's promise
  void* C = static_cast<uint8_t*>(C_base) +
            int64_t(blockIdx.y) * split_stride * (OUT == Elem::f32 ? 4 : 2);
  static_assert(IN != Elem::f32 || (!A_MN && !B_MN), "TF32 operands are read K-major only");

  // The block's tiles: blockIdx.x, then every gridDim.x-th (one tile when the grid has one block
  // per tile; a persistent grid of one block per SM walks several, the producer loading the next
  // tile's slabs while the consumers store this one). `it` counts the block's slabs over all its
  // tiles: slab it lives in stage it % kStages, in that stage's phase it / kStages.
  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    if (tid == 0) {
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const TileCoord tile = grouped_tile(t, tiles_m, tiles_n, 8);
        const int m0 = tile.m * kBM, n0 = tile.n * kBN;
        // MN-major boxes that hold any row of the matrix (at least 1: m0 < M, n0 < N), and the
        // bytes a stage then receives.
        const int a_boxes = min(kBM / kMnBox, (M - m0 + kMnBox - 1) / kMnBox);
        const int b_boxes = min(kBN / kMnBox, (N - n0 + kMnBox - 1) / kMnBox);
        const uint32_t stage_bytes =
            (A_MN ? a_boxes * kMnBoxBytes : kABytes) + (B_MN ? b_boxes * kMnBoxBytes : kBBytes);
        for (int s = 0; s < slabs; ++s, ++it) {
          const int stage = it % kStages;
          // Slab it - kStages, the stage's previous tenant, released by both consumers.
          if (it >= kStages) mbarrier_wait(empty + 8 * stage, (it / kStages - 1) & 1);
          const uint32_t a = base + stage * kStageBytes, bar = full + 8 * stage;
          const int k0 = (first_slab + s) * kBK<IN>;
          mbarrier_arrive_expect_tx(bar, stage_bytes);
          if constexpr (A_MN) {
            for (int c = 0; c < a_boxes; ++c)
              tma_load_2d(a + c * kMnBoxBytes, &map_a, bar, m0 + c * kMnBox, k0);
          } else {
            tma_load_2d(a, &map_a, bar, k0, m0);
          }
          if constexpr (B_MN) {
            for (int c = 0; c < b_boxes; ++c)
              tma_load_2d(a + kABytes + c * kMnBoxBytes, &map_b, bar, n0 + c * kMnBox, k0);
          } else {
            tma_load_2d(a + kABytes, &map_b, bar, k0, n0);
          }
        }
      }
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int consumer = warpgroup - 1;
  const int warp = tid % 128 / 32, lane = tid % 32;
  int it = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileCoord tile = grouped_tile(t, tiles_m, tiles_n, 8);
    const int m0 = tile.m * kBM, n0 = tile.n * kBN;
    float acc_lo[64], acc_hi[64];  // columns n0 .. n0+127 and n0+128 .. n0+255 of 64 rows
#pragma unroll
    for (int i = 0; i < 64; ++i) acc_lo[i] = acc_hi[i] = 0.0f;
    for (int s = 0; s < slabs; ++s, ++it) {
      const int stage = it % kStages;
      mbarrier_wait(full + 8 * stage, (it / kStages) & 1);
      // This consumer's 64 rows of A: 64 K-major rows, or the MN-major box `consumer`.
      const uint32_t a_tile = base + stage * kStageBytes + consumer * 64 * kRowBytes;
      const uint32_t b_tile = base + stage * kStageBytes + kABytes;
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // K-major: 4 steps of 32 bytes (8 TF32, 16 bf16/f16) along the rows; MN-major: 4 steps of
        // 16 rows (16 k) down the boxes. B's second half: rows 128.. (K-major) or boxes 2, 3.
        const uint64_t a = A_MN ? descriptor_mn_major(a_tile + 16 * kRowBytes * k, kMnBoxBytes)
                                : descriptor(a_tile + 32 * k);
        const uint64_t b_lo = B_MN ? descriptor_mn_major(b_tile + 16 * kRowBytes * k, kMnBoxBytes)
                                   : descriptor(b_tile + 32 * k);
        const uint64_t b_hi =
            B_MN ? descriptor_mn_major(b_tile + 2 * kMnBoxBytes + 16 * kRowBytes * k, kMnBoxBytes)
                 : descriptor(b_tile + 128 * kRowBytes + 32 * k);
        if constexpr (IN == Elem::bf16) {
          wgmma_bf16_n128<A_MN, B_MN>(acc_lo, a, b_lo);
          wgmma_bf16_n128<A_MN, B_MN>(acc_hi, a, b_hi);
        } else if constexpr (IN == Elem::f16) {
          wgmma_f16_n128<A_MN, B_MN>(acc_lo, a, b_lo);
          wgmma_f16_n128<A_MN, B_MN>(acc_hi, a, b_hi);
        } else {
          wgmma_tf32_n128(acc_lo, a, b_lo);
          wgmma_tf32_n128(acc_hi, a, b_hi);
        }
      }
      wgmma_commit();
      // Slab it-1's group is done with its stage: hand it back to the producer.
      wgmma_wait<1>();
      if (s > 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
    }
    wgmma_wait<0>();
    // The tile's last slab is done too: its stage goes back before the store, so that the
    // producer fills it with the next tile's slabs meanwhile.
    mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      fence_register(acc_lo[i]);
      fence_register(acc_hi[i]);
    }

    const int row = m0 + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int n = n0 + 8 * j + 2 * (lane % 4);
      if (row < M) {
        store_out<OUT>(C, ldc, row, n, N, alpha, beta, bias, acc_lo[4 * j], acc_lo[4 * j + 1]);
        store_out<OUT>(C, ldc, row, n + 128, N, alpha, beta, bias, acc_hi[4 * j],
                       acc_hi[4 * j + 1]);
      }
      if (row + 8 < M) {
        store_out<OUT>(C, ldc, row + 8, n, N, alpha, beta, bias, acc_lo[4 * j + 2],
                       acc_lo[4 * j + 3]);
        store_out<OUT>(C, ldc, row + 8, n + 128, N, alpha, beta, bias, acc_hi[4 * j + 2],
                       acc_hi[4 * j + 3]);
      }
    }
  }
}

using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

// The driver's tensor-map encoder, looked up once through the runtime (no -lcuda link).
EncodeTiled tensor_map_encoder() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw DeviceError("cuda::sgemm (wgmma_pipelined): the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

// A tensor map over an operand with `rows` rows (M or N) and K columns (fp32, bf16 or f16), written
// 128B-swizzled with zeros past the edges. K-major (stored [rows, K], rows `ld` elements apart):
// boxes of `box_rows` rows x 128 bytes of k. MN-major (16-bit, stored [K, rows], each k's row `ld`
// elements apart): boxes of 64 k rows x 64 rows of the operand (128 bytes).
template <Elem IN>
CUtensorMap operand_map(const void* p, int rows, int K, int64_t ld, int box_rows, bool mn_major) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(mn_major ? rows : K), cuuint64_t(mn_major ? K : rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * (IN == Elem::f32 ? 4 : 2)};
  const cuuint32_t box[2] = {cuuint32_t(mn_major ? kMnBox : kBK<IN>),
                             cuuint32_t(mn_major ? kBK<IN> : box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUtensorMapDataType type = IN == Elem::f32    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : IN == Elem::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r =
      tensor_map_encoder()(&map, type, 2, const_cast<void*>(p), dims, strides, box, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw DeviceError("cuda::sgemm (wgmma_pipelined): cuTensorMapEncodeTiled failed (CUresult " +
                      std::to_string(int(r)) + ")");
  }
  return map;
}

bool fits(const GemmArgs& g) {
  return !g.trans_a && g.trans_b && vector_ok(g.A, g.lda) && vector_ok(g.B, g.ldb) && g.K % 4 == 0;
}

void check_device() {
  if (!device_is_sm90()) {
    throw Error(
        "cuda::sgemm: version wgmma_pipelined needs a GPU of compute capability 9.0 (H100, H200); "
        "this device has another: use tf32_mma or bf16_mma");
  }
}

// The SMs of the current device: a persistent grid's size.
int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    throw DeviceError("gemm_wgmma_pipelined: cannot read the SM count of the current device");
  }
  return count;
}

// persistent: at most one block per SM, each walking several tiles (not with a split of K, whose
// grid fills the GPU already).
template <Elem IN, Elem OUT = Elem::f32, bool A_MN = false, bool B_MN = false>
void launch(int M, int N, int K, float alpha, const void* A, int64_t lda, const void* B,
            int64_t ldb, float beta, void* C, int64_t ldc, gpu::Stream stream,
            const float* bias = nullptr, const SlabSplit& split = {}, bool persistent = false) {
  const int tiles = tile_grid(M, N, kBM, kBN);
  const int blocks = persistent && split.splits <= 1 ? std::min(tiles, multiprocessors()) : tiles;
  const int slabs = (K + kBK<IN> - 1) / kBK<IN>;
  const int per_split = split.splits > 1 ? split.slabs_per_split : slabs;
  if (split.splits > 1 && (split.splits - 1) * int64_t(per_split) >= slabs) {
    throw Error("gemm_wgmma_pipelined: a split of K with an empty last part");
  }
  const CUtensorMap map_a = operand_map<IN>(A, M, K, lda, kBM, A_MN);
  const CUtensorMap map_b = operand_map<IN>(B, N, K, ldb, kBN, B_MN);
  auto kernel = gemm_wgmma_pipelined_kernel<IN, OUT, A_MN, B_MN>;
  set_shared_memory_limit(kernel, kSmemBytes, "gemm_wgmma_pipelined");
  const dim3 grid(unsigned(blocks), unsigned(split.splits));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(map_a, map_b, M, N, K, alpha, beta, C, ldc, bias,
                                                 per_split, split.splits > 1 ? split.stride : 0);
  gpu::check_launch(IN == Elem::f32    ? "gemm_wgmma_pipelined (tf32)"
                    : IN == Elem::bf16 ? "gemm_wgmma_pipelined (bf16)"
                                       : "gemm_wgmma_pipelined (f16)");
}

}  // namespace

void gemm_wgmma_pipelined(const GemmArgs& g, gpu::Stream stream) {
  if (!fits(g)) return gemm_wgmma(g, false, stream);
  check_device();
  launch<Elem::f32>(g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc, stream);
}

void gemm_wgmma_pipelined_k_major(bool bf16, int M, int N, int K, float alpha, const void* A,
                                  int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                                  int64_t ldc, gpu::Stream stream) {
  check_device();
  if (bf16) return launch<Elem::bf16>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  launch<Elem::f32>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}

void gemm_wgmma_k_major(Elem in, Elem out, int M, int N, int K, float alpha, const void* A,
                        int64_t lda, const void* B, int64_t ldb, float beta, void* C, int64_t ldc,
                        const float* bias, const SlabSplit& split, gpu::Stream stream) {
  gemm_wgmma_any_major(in, out, false, false, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias,
                       split, stream, false);
}

void gemm_wgmma_any_major(Elem in, Elem out, bool a_mn_major, bool b_mn_major, int M, int N, int K,
                          float alpha, const void* A, int64_t lda, const void* B, int64_t ldb,
                          float beta, void* C, int64_t ldc, const float* bias,
                          const SlabSplit& split, gpu::Stream stream, bool persistent) {
  check_device();
  if (split.splits > 1 && (out != Elem::f32 || bias != nullptr)) {
    throw Error("gemm_wgmma_k_major: split parts are f32 without a bias");
  }
  if (in == Elem::f32 && (a_mn_major || b_mn_major)) {
    throw Error("gemm_wgmma_any_major: wgmma reads TF32 operands K-major only");
  }
  // One instantiation per (operand type, C type, A's major-ness, B's).
  const auto run = [&](auto in_type, auto out_type, auto a_mn, auto b_mn) {
    launch<decltype(in_type)::value, decltype(out_type)::value, decltype(a_mn)::value,
           decltype(b_mn)::value>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream, bias, split,
                                  persistent);
  };
  const auto run_16bit = [&](auto in_type, auto out_type) {
    using No = std::false_type;
    using Yes = std::true_type;
    if (!a_mn_major && !b_mn_major) return run(in_type, out_type, No{}, No{});
    if (!a_mn_major && b_mn_major) return run(in_type, out_type, No{}, Yes{});
    if (a_mn_major && !b_mn_major) return run(in_type, out_type, Yes{}, No{});
    run(in_type, out_type, Yes{}, Yes{});
  };
  using E = Elem;
  using Bf16 = std::integral_constant<E, E::bf16>;
  using F16 = std::integral_constant<E, E::f16>;
  using F32 = std::integral_constant<E, E::f32>;
  if (in == E::bf16 && out == E::f32) return run_16bit(Bf16{}, F32{});
  if (in == E::bf16 && out == E::bf16) return run_16bit(Bf16{}, Bf16{});
  if (in == E::f16 && out == E::f32) return run_16bit(F16{}, F32{});
  if (in == E::f16 && out == E::f16) return run_16bit(F16{}, F16{});
  if (in == E::f32 && out == E::f32) return run(F32{}, F32{}, std::false_type{}, std::false_type{});
  throw Error("gemm_wgmma_k_major: operands f32, bf16 or f16, C f32 or the operands' type");
}

}  // namespace crema::kernels::cuda::detail
