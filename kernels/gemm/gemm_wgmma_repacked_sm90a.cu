// t5 wgmma_repacked: t4's kernel (TMA, a 4-stage mbarrier ring, wgmma) for every layout, and for
// bf16 math on fp32 operands. wgmma reads a TF32 operand only K-major (A [M,K], B [N,K] in shared
// memory) and TMA copies a tile as it lies in memory, so t4 alone runs NT calls; bf16 math needs
// the fp32 operands converted before the tensor cores see them. t5 does both in one pass per
// operand before the product, into a workspace:
//
//   TF32  an MN-major operand (A stored [K,M] when trans_a, B stored [K,N] when !trans_b) is
//         transposed to [M or N, Kp]; its values are copied unchanged, so the tensor cores
//         truncate them to TF32 as t4 does. A K-major operand is read in place.
//   bf16  both operands are rounded to bf16 (nearest even, as t2) into [M or N, Kp], transposed
//         where MN-major.
//   Kp    K rounded up to 16 bytes (4 floats, 8 bf16), zeros past K: a tensor map's row stride is
//         a multiple of 16 bytes. When K itself is not, both operands are copied and the product
//         runs over Kp (the zero columns add nothing).
//
// The pass moves each copied element once in and once out: 32 x 32 tiles through shared memory (a
// 33-float row stride, so the transposed reads of a warp hit 32 banks), 256 threads of 4 elements
// each, coalesced reads and writes in either layout. An 8192^2 fp32 transpose moves 512 MB, ~0.15
// ms at the H200's ~3.5 TB/s, against ~2.9 ms for the TF32 product of 8192^3.
//
// cuda::gemm_bf16 (bf16 operands in memory) runs through the same pass: MN-major operands are
// transposed (bf16 to bf16, exact) into the workspace, K-major ones read in place.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {
namespace detail {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

__device__ __forceinline__ float load_value(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_value(const uint16_t* p) {
  return __uint_as_float(uint32_t(*p) << 16);  // bf16 bits -> fp32, exact
}
// A value read by load_value stored again: fp32 unchanged, fp32 to bf16 rounded to nearest even,
// and 16-bit to 16-bit as the same bits (load_value put them in the high half), so that bf16 and
// f16 operands are both copied exactly.
template <class In>
__device__ __forceinline__ void store_value(float* p, float v) {
  *p = v;
}
template <class In>
__device__ __forceinline__ void store_value(uint16_t* p, float v) {
  if constexpr (sizeof(In) == 2) {
    *p = uint16_t(__float_as_uint(v) >> 16);
  } else {
    *p = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

// dst[r * Kp + k] = x(r, k) for r < R, k < Kp, and 0 for k >= K, where x(r, k) = src[k * lds + r]
// (TRANSPOSED: the operand is MN-major) or src[r * lds + k]. A (32, 8) block handles a column of
// 32 x 32 tiles, tile rows strided by gridDim.y (whose extent is limited to 65535).
template <class In, class Out, bool TRANSPOSED>
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    repack_kernel(int R, int K, int Kp, const In* __restrict__ src, int64_t lds,
                  Out* __restrict__ dst) {
  __shared__ float tile[kTile][kTile + 1];  // [k][r] of the tile (transposed case)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int k0 = blockIdx.x * kTile, r_tiles = (R + kTile - 1) / kTile;
  for (int rt = blockIdx.y; rt < r_tiles; rt += gridDim.y) {
    const int r0 = rt * kTile;
    if constexpr (TRANSPOSED) {
      // Read along r (contiguous in src), write along k (contiguous in dst).
#pragma unroll
      for (int i = 0; i < kTile; i += kRowsPerPass) {
        const int k = k0 + ty + i, r = r0 + tx;
        tile[ty + i][tx] = k < K && r < R ? load_value(src + int64_t(k) * lds + r) : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kTile; i += kRowsPerPass) {
        const int r = r0 + ty + i, k = k0 + tx;
        if (r < R && k < Kp) store_value<In>(dst + int64_t(r) * Kp + k, tile[tx][ty + i]);
      }
      __syncthreads();
    } else {
#pragma unroll
      for (int i = 0; i < kTile; i += kRowsPerPass) {
        const int r = r0 + ty + i, k = k0 + tx;
        if (r < R && k < Kp) {
          store_value<In>(dst + int64_t(r) * Kp + k,
                          k < K ? load_value(src + int64_t(r) * lds + k) : 0.0f);
        }
      }
    }
  }
}

template <class In, class Out>
void repack(bool transposed, int R, int K, int Kp, const In* src, int64_t lds, Out* dst,
            gpu::Stream stream) {
  const dim3 block(kTile, kRowsPerPass);
  const dim3 grid(unsigned((Kp + kTile - 1) / kTile),
                  unsigned(std::min((R + kTile - 1) / kTile, 65535)));
  if (transposed) {
    repack_kernel<In, Out, true><<<grid, block, 0, stream>>>(R, K, Kp, src, lds, dst);
  } else {
    repack_kernel<In, Out, false><<<grid, block, 0, stream>>>(R, K, Kp, src, lds, dst);
  }
  gpu::check_launch("gemm_repack");
}

}  // namespace

RepackPlan make_repack_plan(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            int element_bytes, bool copy_all) {
  RepackPlan p;
  if (M <= 0 || N <= 0 || K <= 0) return p;  // no product: nothing is read
  const int64_t align = 16 / element_bytes;
  const bool ragged = K % align != 0;
  p.kp = (K + align - 1) / align * align;
  p.copy_a = copy_all || trans_a || ragged;
  p.copy_b = copy_all || !trans_b || ragged;
  if (p.copy_a) p.a_floats = size_t(M * p.kp * element_bytes / 4);
  if (p.copy_b) p.b_floats = size_t(N * p.kp * element_bytes / 4);
  return p;
}

void repack_16bit(bool transposed, int R, int K, int Kp, const uint16_t* src, int64_t lds,
                  uint16_t* dst, gpu::Stream stream) {
  repack<uint16_t, uint16_t>(transposed, R, K, Kp, src, lds, dst, stream);
}

namespace {

using Plan = RepackPlan;
Plan make_plan(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int element_bytes,
               bool copy_all) {
  return make_repack_plan(trans_a, trans_b, M, N, K, element_bytes, copy_all);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

void check_device(const char* who) {
  if (!device_is_sm90()) {
    throw Error(std::string(who) +
                " needs a GPU of compute capability 9.0 (H100, H200); this device has another");
  }
}

// The K t4's kernel runs over: the zero-padded kp when both operands are copied (K ragged),
// otherwise K (then kp == K).
int64_t product_k(const Plan& p, int64_t K) {
  return p.copy_a && p.copy_b ? p.kp : K;
}

// Copies the operands `p` names into `workspace` (In -> Out) and runs t4's kernel on the K-major
// result; with `split` (t5's split of K) into fp32 parts at `parts`, then added into C. Arguments
// checked by the callers.
template <class In, class Out>
void repack_and_multiply(const Plan& p, bool trans_a, bool trans_b, int M, int N, int K,
                         float alpha, const In* A, int64_t lda, const In* B, int64_t ldb,
                         float beta, float* C, int64_t ldc, float* workspace, gpu::Stream stream,
                         const SlabSplit& split = {}, float* parts = nullptr) {
  constexpr bool kBf16 = sizeof(Out) == 2;
  const void* a = A;
  const void* b = B;
  const int kp = int(p.kp);
  if (p.copy_a) {
    Out* copy = reinterpret_cast<Out*>(workspace);
    repack<In, Out>(trans_a, M, K, kp, A, lda, copy, stream);
    a = copy;
    lda = kp;
  }
  if (p.copy_b) {
    Out* copy = reinterpret_cast<Out*>(workspace + p.a_floats);
    repack<In, Out>(!trans_b, N, K, kp, B, ldb, copy, stream);
    b = copy;
    ldb = kp;
  }
  const int k = int(product_k(p, K));
  if (split.splits > 1) {
    gemm_wgmma_k_major(kBf16 ? Elem::bf16 : Elem::f32, Elem::f32, M, N, k, 1.0f, a, lda, b, ldb,
                       0.0f, parts, N, nullptr, split, stream);
    return sum_parts(Elem::f32, M, N, split.splits, parts, alpha, nullptr, beta, C, ldc, stream);
  }
  gemm_wgmma_pipelined_k_major(kBf16, M, N, k, alpha, a, lda, b, ldb, beta, C, ldc, stream);
}

// t5's split of K (none without a workspace: the parts live there, after the copies).
SlabSplit t5_split(const Plan& p, int64_t M, int64_t N, int64_t K, bool bf16) {
  return wgmma_split(M, N, product_k(p, K), bf16 ? 64 : 32);
}

}  // namespace

void gemm_wgmma_repacked(const GemmArgs& g, bool bf16, float* workspace, gpu::Stream stream) {
  check_device("cuda::sgemm: version wgmma_repacked");
  const Plan p = make_plan(g.trans_a, g.trans_b, g.M, g.N, g.K, bf16 ? 2 : 4, bf16);
  const bool a_fits = p.copy_a || (aligned16(g.A) && g.lda % 4 == 0);
  const bool b_fits = p.copy_b || (aligned16(g.B) && g.ldb % 4 == 0);
  if ((p.floats() > 0 && workspace == nullptr) || !a_fits || !b_fits || p.kp > INT32_MAX) {
    // What t5 needs is missing: the versions it builds on take the call.
    return bf16 ? gemm_wgmma(g, true, stream) : gemm_wgmma_pipelined(g, stream);
  }
  if (p.floats() > 0 && !aligned16(workspace)) {
    throw Error("cuda::sgemm (wgmma_repacked): the workspace must be 16-byte aligned");
  }
  // A skinny product with a long K splits K when the caller gave the workspace that asks for.
  const SlabSplit split = workspace != nullptr ? t5_split(p, g.M, g.N, g.K, bf16) : SlabSplit{};
  float* parts = split.splits > 1 ? workspace + p.floats() : nullptr;
  if (bf16) {
    repack_and_multiply<float, uint16_t>(p, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A,
                                         g.lda, g.B, g.ldb, g.beta, g.C, g.ldc, workspace, stream,
                                         split, parts);
  } else {
    repack_and_multiply<float, float>(p, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A, g.lda,
                                      g.B, g.ldb, g.beta, g.C, g.ldc, workspace, stream, split,
                                      parts);
  }
}

void gemm_bf16_repacked(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                        const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta,
                        float* C, int64_t ldc, float* workspace, gpu::Stream stream) {
  const Plan p = make_plan(trans_a, trans_b, M, N, K, 2, false);
  if (!p.copy_a && !(aligned16(A) && lda % 8 == 0)) {
    throw Error("cuda::gemm_bf16: A [M,K] is read in place and must be 16-byte aligned with lda (" +
                std::to_string(lda) +
                ") a multiple of 8: the copy engine reads rows of whole 16-byte units");
  }
  if (!p.copy_b && !(aligned16(B) && ldb % 8 == 0)) {
    throw Error("cuda::gemm_bf16: B [N,K] is read in place and must be 16-byte aligned with ldb (" +
                std::to_string(ldb) +
                ") a multiple of 8: the copy engine reads rows of whole 16-byte units");
  }
  if (p.floats() > 0 && (workspace == nullptr || !aligned16(workspace))) {
    throw Error("cuda::gemm_bf16: this call (trans_a=" + std::to_string(int(trans_a)) +
                ", trans_b=" + std::to_string(int(trans_b)) + ", K=" + std::to_string(K) +
                ") needs a 16-byte aligned workspace of gemm_bf16_workspace(...) = " +
                std::to_string(p.floats()) + " floats");
  }
  if (p.kp > INT32_MAX) throw Error("cuda::gemm_bf16: K=" + std::to_string(K) + " is too large");
  check_device("cuda::gemm_bf16");
  repack_and_multiply<uint16_t, uint16_t>(p, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                                          C, ldc, workspace, stream);
}

}  // namespace detail

size_t sgemm_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                       GemmVersion version, GemmMath math) {
  if (version == GemmVersion::ffma_tuned) {
    const detail::KSplit split = detail::ffma_split(M, N, K);
    return split.splits > 1 ? size_t(split.splits) * size_t(M) * size_t(N) : 0;
  }
  if (version != GemmVersion::wgmma_repacked || math == GemmMath::fp32) return 0;
  const bool bf16 = math == GemmMath::bf16;
  const detail::Plan p = detail::make_plan(trans_a, trans_b, M, N, K, bf16 ? 2 : 4, bf16);
  if (p.kp == 0) return 0;  // no product
  const detail::SlabSplit split = detail::t5_split(p, M, N, K, bf16);
  return p.floats() + (split.splits > 1 ? size_t(split.splits) * size_t(M) * size_t(N) : 0);
}

size_t gemm_bf16_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  return detail::make_plan(trans_a, trans_b, M, N, K, 2, false).floats();
}

// Measured on an H200 (README.md): t5 beat t1/t2 from 1024^3 (0.042 vs 0.059 ms TF32) up, and
// lost at 1024 x 1024 x 256 (0.027 vs 0.023 ms), where its copy pass and 8 tiles per SM weigh.
// A skinny product with a long K (a weight gradient: C with at most a quarter as many 128 x 128
// tiles as the GPU has SMs, K >= 4096) takes t5 too, whose split of K fills the GPU where t1/t2
// walk all of K on those few blocks.
GemmVersion best_version(GemmMath math, int64_t M, int64_t N, int64_t K) {
  if (math == GemmMath::fp32 || !detail::device_is_sm90()) return best_version(math);
  if (M >= 1024 && N >= 1024 && K >= 256 && double(M) * double(N) * double(K) >= double(1 << 30)) {
    return GemmVersion::wgmma_repacked;
  }
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      K >= 4096 && M > 0 && N > 0 && 4 * ((M + 127) / 128) * ((N + 127) / 128) <= sms) {
    return GemmVersion::wgmma_repacked;
  }
  return best_version(math);
}

}  // namespace crema::kernels::cuda
