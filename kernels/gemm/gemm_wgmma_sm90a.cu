// t3 wgmma: Hopper's warpgroup MMA (sm_90a), fp32 accumulation, TF32 or bf16 operands. This file
// is compiled for sm_90a alone (CMakeLists.txt, *_sm90a.cu); gemm_wgmma checks the device first.
//
//   block tile 128 x 128 (k slab 32 TF32, 64 bf16): a slab row is 128 bytes of either type, one
//   128-byte swizzle atom wide
//   256 threads = 2 warpgroups; warpgroup w multiplies rows 64w..64w+63 of the block tile by the
//   whole B slab: 4 wgmma (m64 n128 k8 TF32, m64 n128 k16 bf16) per slab, issued asynchronously
//   3 shared stages. While the tensor cores work through slab s (and s-1 drains), every thread
//   loads its share of slab s+1 from global memory into registers, rounds it (cvt.rna.tf32 or
//   cvt.rn.bf16x2), and stores it K-major and swizzled into the stage that slab s-2 left free
//
// Why registers and not TMA or cp.async: operands stay fp32 in memory (what a framework passes).
// bf16 must be converted before the tensor cores read it, and wgmma reads TF32 only K-major, so
// an operand whose rows run along M or N (B in NN, A in TN) must be transposed on the way. One
// register pass does the rounding, the transpose, the zero-fill past the edges and the swizzle,
// for any alignment and leading dimension. README.md has what it costs.
//
// Shared layout (what the descriptors say): a tile of R rows (m or n) x 128 bytes of k; row r at
// byte 128r, its 16-byte chunk c stored at chunk position c ^ (r % 8); tiles 1024-byte aligned.
// Descriptor: start address, stride between 8-row groups 1024 bytes, swizzle mode 128B. The k
// step inside a slab advances the start address by 32 bytes.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_wgmma_instructions.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::detail {
namespace {

constexpr int kBM = 128, kThreads = 256, kStages = 3, kRowBytes = 128;

template <bool BF16>
struct Shape {
  static constexpr int BN = 128;
  static constexpr int CHUNK_K = BF16 ? 8 : 4;  // k values per 16-byte chunk of a shared row
  static constexpr int BK = 8 * CHUNK_K;        // 8 chunks: one 128-byte row
  static constexpr int ACC = BN / 2;            // accumulators per thread (64 x BN per warpgroup)
  static constexpr int A_BYTES = kBM * kRowBytes, B_BYTES = BN * kRowBytes;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = kStages * STAGE_BYTES + 1024;  // + room to align to 1024
};

__device__ __forceinline__ float component(const float4& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// 4 consecutive elements along the operand's contiguous side starting at q; `left` of them lie
// inside the matrix (<= 0: none); the rest read as 0.
__device__ __forceinline__ float4 load4(const float* q, bool line_inside, int left, bool vec) {
  float4 r = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (!line_inside || left <= 0) return r;
  if (vec && left >= 4) return *reinterpret_cast<const float4*>(q);
  r.x = q[0];
  if (left > 1) r.y = q[1];
  if (left > 2) r.z = q[2];
  if (left > 3) r.w = q[3];
  return r;
}

// One operand's share of a slab, in flight in registers. Element (o, k) is p[o*ld + k] when
// K_CONTIGUOUS, else p[k*ld + o]; the slab holds ROWS values of o and BK of k.
//   K_CONTIGUOUS: thread t takes chunks t, t + 256, ...; chunk i is row i/8, chunk column i%8,
//     CHUNK_K consecutive k: 8 threads read one row's 128 (TF32) or 256 (bf16) contiguous bytes.
//   otherwise: a warp takes 16 rows o at a time; lane l reads k = (l%8)*CHUNK_K .. +CHUNK_K-1 at
//     o = 4*(l/8) .. +3 (CHUNK_K float4s, 64 contiguous bytes per k row across 4 lanes), and
//     transposes them into 4 chunks, one per o: the 8 lanes of a quarter-warp store 8 different
//     chunks of one row, 128 bytes, no bank conflict.
template <bool BF16, bool K_CONTIGUOUS, int ROWS>
struct OperandLoader {
  using S = Shape<BF16>;
  static constexpr int VECTORS = ROWS * S::CHUNK_K / 128;  // float4s per thread
  static constexpr int GROUPS = K_CONTIGUOUS ? ROWS * 8 / kThreads : ROWS / 16 / 8;
  static constexpr int PER_GROUP = VECTORS / GROUPS;
  static_assert(GROUPS >= 1 && VECTORS % GROUPS == 0, "tile too small for 256 threads");

  const float* p;
  int64_t ld;
  int o0, outer_size, k_size;
  bool vec;
  float4 regs[GROUPS][PER_GROUP];

  __device__ void fetch(int k0, int tid) {
#pragma unroll
    for (int i = 0; i < GROUPS; ++i) {
      if constexpr (K_CONTIGUOUS) {
        const int chunk = tid + i * kThreads;
        const int o = o0 + chunk / 8, k = k0 + chunk % 8 * S::CHUNK_K;
#pragma unroll
        for (int v = 0; v < PER_GROUP; ++v) {
          regs[i][v] = load4(p + o * ld + k + 4 * v, o < outer_size, k_size - k - 4 * v, vec);
        }
      } else {
        const int warp = tid / 32, lane = tid % 32;
        const int o = o0 + (warp * GROUPS + i) * 16 + 4 * (lane / 8);
        const int k = k0 + lane % 8 * S::CHUNK_K;
#pragma unroll
        for (int v = 0; v < PER_GROUP; ++v) {
          regs[i][v] = load4(p + (k + v) * ld + o, k + v < k_size, outer_size - o, vec);
        }
      }
    }
  }

  // 16 bytes of rounded values from `CHUNK_K` floats f[0..CHUNK_K).
  __device__ static uint4 pack(const float (&f)[S::CHUNK_K]) {
    if constexpr (BF16) {
      return make_uint4(to_bf16x2(f[0], f[1]), to_bf16x2(f[2], f[3]), to_bf16x2(f[4], f[5]),
                        to_bf16x2(f[6], f[7]));
    } else {
      return make_uint4(to_tf32(f[0]), to_tf32(f[1]), to_tf32(f[2]), to_tf32(f[3]));
    }
  }

  __device__ static void store_chunk(uint8_t* tile, int row, int chunk, uint4 v) {
    *reinterpret_cast<uint4*>(tile + row * kRowBytes + ((chunk ^ (row & 7)) << 4)) = v;
  }

  __device__ void stash(uint8_t* tile, int tid) const {
#pragma unroll
    for (int i = 0; i < GROUPS; ++i) {
      if constexpr (K_CONTIGUOUS) {
        const int chunk = tid + i * kThreads;
        float f[S::CHUNK_K];
#pragma unroll
        for (int v = 0; v < PER_GROUP; ++v) {
#pragma unroll
          for (int e = 0; e < 4; ++e) f[4 * v + e] = component(regs[i][v], e);
        }
        store_chunk(tile, chunk / 8, chunk % 8, pack(f));
      } else {
        const int warp = tid / 32, lane = tid % 32;
        const int row = (warp * GROUPS + i) * 16 + 4 * (lane / 8);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float f[S::CHUNK_K];
#pragma unroll
          for (int v = 0; v < PER_GROUP; ++v) f[v] = component(regs[i][v], e);
          store_chunk(tile, row + e, lane % 8, pack(f));
        }
      }
    }
  }
};

// TF32 fits two blocks per SM (at most 128 registers: 64 accumulators + 32 in flight); bf16's
// slab in flight is twice as many floats, and two blocks would spill.
template <bool BF16, bool TA, bool TB>
__global__ void __launch_bounds__(kThreads, BF16 ? 1 : 2)
    gemm_wgmma_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
                      const float* __restrict__ B, int64_t ldb, float beta, float* __restrict__ C,
                      int64_t ldc, bool vec_a, bool vec_b) {
  using S = Shape<BF16>;
  extern __shared__ uint8_t raw_smem[];
  const uint32_t raw_address = uint32_t(__cvta_generic_to_shared(raw_smem));
  uint8_t* smem = raw_smem + ((1024 - raw_address % 1024) % 1024);
  const uint32_t smem_address = uint32_t(__cvta_generic_to_shared(smem));

  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + S::BN - 1) / S::BN;
  const TileCoord tile = grouped_tile(blockIdx.x, tiles_m, tiles_n, 8);
  const int m0 = tile.m * kBM, n0 = tile.n * S::BN;
  const int tid = threadIdx.x, warpgroup = tid / 128;
  const int slabs = (K + S::BK - 1) / S::BK;

  OperandLoader<BF16, !TA, kBM> load_a{A, lda, m0, M, K, vec_a, {}};
  OperandLoader<BF16, TB, S::BN> load_b{B, ldb, n0, N, K, vec_b, {}};
  auto stash = [&](int s) {
    uint8_t* stage = smem + s % kStages * S::STAGE_BYTES;
    load_a.stash(stage, tid);
    load_b.stash(stage + S::A_BYTES, tid);
    fence_async_shared();
  };

  load_a.fetch(0, tid);
  load_b.fetch(0, tid);
  stash(0);
  __syncthreads();

  float acc[S::ACC];
#pragma unroll
  for (int i = 0; i < S::ACC; ++i) acc[i] = 0.0f;
  for (int s = 0; s < slabs; ++s) {
    if (s + 1 < slabs) {  // global loads of slab s+1 travel while the tensor cores work
      load_a.fetch((s + 1) * S::BK, tid);
      load_b.fetch((s + 1) * S::BK, tid);
    }
    const uint32_t stage = smem_address + s % kStages * S::STAGE_BYTES;
    const uint32_t a_tile = stage + warpgroup * 64 * kRowBytes, b_tile = stage + S::A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // 4 steps of 32 bytes of k
      if constexpr (BF16) {
        wgmma_bf16_n128(acc, descriptor(a_tile + 32 * k), descriptor(b_tile + 32 * k));
      } else {
        wgmma_tf32_n128(acc, descriptor(a_tile + 32 * k), descriptor(b_tile + 32 * k));
      }
    }
    wgmma_commit();
    // Slab s-1's group is done: its stage is refilled next iteration. The stage refilled now,
    // (s+1) % 3, held slab s-2, finished before the previous iteration's barrier.
    wgmma_wait<1>();
    if (s + 1 < slabs) stash(s + 1);
    __syncthreads();
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < S::ACC; ++i) fence_register(acc[i]);

  const int warp = tid % 128 / 32, lane = tid % 32;
  const int row = m0 + warpgroup * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < S::BN / 8; ++j) {
    const int n = n0 + 8 * j + 2 * (lane % 4);
    if (row < M) store_pair(C, ldc, row, n, N, alpha, beta, acc[4 * j], acc[4 * j + 1]);
    if (row + 8 < M) store_pair(C, ldc, row + 8, n, N, alpha, beta, acc[4 * j + 2], acc[4 * j + 3]);
  }
}

template <bool BF16, bool TA, bool TB>
void launch(const GemmArgs& g, gpu::Stream stream) {
  using S = Shape<BF16>;
  auto kernel = gemm_wgmma_kernel<BF16, TA, TB>;
  set_shared_memory_limit(kernel, S::SMEM_BYTES, "gemm_wgmma");
  kernel<<<tile_grid(g.M, g.N, kBM, S::BN), kThreads, S::SMEM_BYTES, stream>>>(
      g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc, vector_ok(g.A, g.lda),
      vector_ok(g.B, g.ldb));
  gpu::check_launch(BF16 ? "gemm_wgmma (bf16)" : "gemm_wgmma (tf32)");
}

template <bool BF16>
void dispatch(const GemmArgs& g, gpu::Stream stream) {
  for_layout(g, [&](auto ta, auto tb) {
    launch<BF16, decltype(ta)::value, decltype(tb)::value>(g, stream);
  });
}

}  // namespace

void gemm_wgmma(const GemmArgs& args, bool bf16, gpu::Stream stream) {
  if (!device_is_sm90()) {
    throw Error(
        "cuda::sgemm: version wgmma needs a GPU of compute capability 9.0 (H100, H200); this "
        "device has another: use tf32_mma or bf16_mma");
  }
  if (bf16) {
    dispatch<true>(args, stream);
  } else {
    dispatch<false>(args, stream);
  }
}

}  // namespace crema::kernels::cuda::detail
