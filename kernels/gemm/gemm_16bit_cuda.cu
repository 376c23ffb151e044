// cuda::gemm_16bit: C = alpha op(A) op(B) + bias[n] + beta C with A and B bf16 or f16 in memory
// (a bf16 or f16 net's activations and weight copies), C f32 or the operands' type, fp32
// accumulation on the tensor cores. Three ways, by version:
//
//   wgmma_in_place (compute capability 9.0; production's)
//     t4's kernel, on a persistent grid (one block per SM walking several tiles: the next tile's
//     slabs load during a tile's store; not with a split of K), reads every operand where it lies:
//     wgmma takes a 16-bit operand MN-major (its transpose immediate), so A stored [K,M] (trans_a)
//     and B stored [K,N] (!trans_b) need no copy; their tensor maps run along M (N) and the
//     descriptors say MN-major (gemm_wgmma_pipelined_sm90a.cu). The copy engine zero-fills past
//     every edge, so any M, N, K runs as it is. What it cannot read: a row stride (lda, ldb) that
//     is not a multiple of 8 elements (16 bytes, a tensor map's rule): that operand alone is copied
//     K-major into the workspace, as wgmma_repacked copies (the fallback; with packed operands: A
//     when trans_a ? M : K is not a multiple of 8, B when trans_b ? K : N is not). A base address
//     that is not 16-byte aligned throws (no plan made from the shape can foresee it). The split of
//     K below is the same, so the workspace is the split's parts and the fallback copies, nothing
//     else.
//   wgmma_repacked (t5's way, compute capability 9.0; kept to compare)
//     MN-major operands (A stored [K,M] when trans_a, B stored [K,N] when !trans_b, and both
//     when K is not a multiple of 8) are copied K-major into the workspace (bits unchanged, zero
//     columns up to Kp), then t4's TMA-fed wgmma kernel multiplies them; its store adds the bias
//     and rounds once into a 16-bit C.
//     Split of K: a product whose 128 x 256 tiles of C fill less than half the SMs, with a long K
//     (a weight gradient: dW [out, in] = dY^T X over the batch's N*H*W positions, 384 x 96 over
//     200,704 in ConvNeXt-T's first stage at batch 64: 3 tiles for 132 SMs) runs a grid of
//     `splits` block rows, each summing a fixed run of k slabs into its own fp32 M x N part of the
//     workspace; sum_parts adds the parts in split order and blends alpha, the bias and beta into
//     C. The plan (wgmma_split) depends on the shape and the device's SM count only: the same
//     bits on every run of one GPU model, no atomics. t5 (gemm_wgmma_repacked_sm90a.cu) splits
//     the same way.
//   bf16_mma, tf32_mma (any GPU)
//     Both operands are widened to fp32 into the workspace (exact), t2 (bf16 operands: its bf16
//     rounding is exact on them) or t1 (f16 operands: TF32's 10-bit mantissa and 8-bit exponent
//     hold every f16 value) multiplies them into an fp32 part, and sum_parts stores C.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_cuda_internal.h"
#include "kernels/gemm/gemm_elem.cuh"

namespace crema::kernels::cuda {
namespace detail {
namespace {

// Each split sums at least this many slabs of 64 k: its part's store and the pipeline's fill
// stay small against its product.
constexpr int64_t kMinSlabsPerSplit = 8;

Elem elem_of(DType t) {
  switch (t) {
    case DType::bf16:
      return Elem::bf16;
    case DType::f16:
      return Elem::f16;
    default:
      return Elem::f32;
  }
}

// dst [rows, cols] (dense) = src [rows, cols] (leading dimension ld) widened to fp32.
template <Elem T>
__global__ void widen_kernel(int64_t rows, int64_t cols, const uint16_t* __restrict__ src,
                             int64_t ld, float* __restrict__ dst) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = widen<T>(src[i / cols * ld + i % cols]);
  }
}

// C = alpha * (part[0] + part[1] + ... + part[splits-1]) + bias[n] + beta * C, the parts M x N
// dense fp32, added in split order (splits == 0: C = bias + beta C, nothing read); beta == 0
// leaves C unread. OUT is C's type.
template <Elem OUT>
__global__ void sum_parts_kernel(int M, int N, int splits, const float* __restrict__ parts,
                                 float alpha, const float* __restrict__ bias, float beta,
                                 void* __restrict__ C, int64_t ldc) {
  const int64_t count = int64_t(M) * N;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < count;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = index / N, n = index % N;
    float sum = 0.0f;
    for (int y = 0; y < splits; ++y) sum += parts[y * count + index];
    float v = alpha * sum;
    if (bias != nullptr) v += bias[n];
    if constexpr (OUT == Elem::f32) {
      float* c = static_cast<float*>(C) + m * ldc + n;
      *c = beta == 0.0f ? v : v + beta * *c;
    } else {
      uint16_t* c = static_cast<uint16_t*>(C) + m * ldc + n;
      *c = narrow<OUT>(beta == 0.0f ? v : v + beta * widen<OUT>(*c));
    }
  }
}

void widen_operand(Elem t, int64_t rows, int64_t cols, const uint16_t* src, int64_t ld, float* dst,
                   gpu::Stream stream) {
  const int blocks = blocks_for(rows * cols);
  if (t == Elem::bf16) {
    widen_kernel<Elem::bf16><<<blocks, kThreads, 0, stream>>>(rows, cols, src, ld, dst);
  } else {
    widen_kernel<Elem::f16><<<blocks, kThreads, 0, stream>>>(rows, cols, src, ld, dst);
  }
  gpu::check_launch("gemm_16bit (widen operand)");
}

int sm_count() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    throw DeviceError("cuda GEMM split of K: cannot read the SM count of the current device");
  }
  return count;
}

// What a call takes: the repacked copies and the split (wgmma_in_place, wgmma_repacked), or the
// widened operands and one fp32 part (the mma.sync versions), in this order in the workspace.
struct Plan16 {
  bool wgmma = false;
  bool a_mn = false, b_mn = false;  // read MN-major in place (wgmma_in_place)
  RepackPlan repack;
  SlabSplit split;
  int64_t product_k = 0;  // the K t4's kernel runs over (Kp when both operands are copied)
  size_t widened_a = 0, widened_b = 0, parts = 0;  // floats
  size_t floats() const { return repack.floats() + widened_a + widened_b + parts; }
};

// wgmma_in_place's plan: an operand whose row stride `ld` is a multiple of 8 is read in place
// (MN-major where it is stored so); any other is copied K-major to rows of kp. The product runs
// over K either way (the copies' zero columns past K add nothing).
RepackPlan in_place_plan(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda,
                         int64_t ldb, bool& a_mn, bool& b_mn) {
  RepackPlan r;
  r.kp = (K + 7) / 8 * 8;
  r.copy_a = lda % 8 != 0;
  r.copy_b = ldb % 8 != 0;
  if (r.copy_a) r.a_floats = size_t(M * r.kp / 2);
  if (r.copy_b) r.b_floats = size_t(N * r.kp / 2);
  a_mn = trans_a && !r.copy_a;
  b_mn = !trans_b && !r.copy_b;
  return r;
}

// lda, ldb: the operands' leading dimensions (0: packed, trans_a ? M : K and trans_b ? K : N).
Plan16 make_plan16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, GemmVersion version,
                   int64_t lda = 0, int64_t ldb = 0) {
  Plan16 p;
  if (M <= 0 || N <= 0 || K <= 0) return p;  // no product: nothing is read
  p.wgmma = version == GemmVersion::wgmma_repacked || version == GemmVersion::wgmma_in_place;
  if (version == GemmVersion::wgmma_in_place) {
    const int64_t packed_a = trans_a ? M : K, packed_b = trans_b ? K : N;
    p.repack = in_place_plan(trans_a, trans_b, M, N, K, lda > 0 ? lda : packed_a,
                             ldb > 0 ? ldb : packed_b, p.a_mn, p.b_mn);
    p.product_k = K;
    p.split = wgmma_split(M, N, p.product_k, kWgmma16SlabK);
    if (p.split.splits > 1) p.parts = size_t(p.split.splits) * size_t(M) * size_t(N);
  } else if (p.wgmma) {
    p.repack = make_repack_plan(trans_a, trans_b, M, N, K, 2, false);
    p.product_k = p.repack.copy_a && p.repack.copy_b ? p.repack.kp : K;
    p.split = wgmma_split(M, N, p.product_k, kWgmma16SlabK);
    if (p.split.splits > 1) p.parts = size_t(p.split.splits) * size_t(M) * size_t(N);
  } else {
    p.widened_a = size_t(M) * size_t(K);
    p.widened_b = size_t(K) * size_t(N);
    p.parts = size_t(M) * size_t(N);
  }
  return p;
}

std::string dims(int64_t M, int64_t N, int64_t K) {
  return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

// Throws crema::Error naming what does not fit: the dtypes, the version, the sizes.
void check_call(DType operands, DType c_type, GemmVersion version, bool trans_a, bool trans_b,
                int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  const std::string who = "cuda::gemm_16bit: ";
  if (operands != DType::bf16 && operands != DType::f16) {
    throw Error(who + "operands must be bf16 or f16, got " + dtype_name(operands));
  }
  if (c_type != DType::f32 && c_type != operands) {
    throw Error(who + "C must be f32 or the operands' " + dtype_name(operands) + ", got " +
                dtype_name(c_type));
  }
  if (version == GemmVersion::bf16_mma && operands != DType::bf16) {
    throw Error(who + "version bf16_mma would round f16 operands to bf16; use tf32_mma");
  }
  if (version != GemmVersion::wgmma_in_place && version != GemmVersion::wgmma_repacked &&
      version != GemmVersion::bf16_mma && version != GemmVersion::tf32_mma) {
    throw Error(who + "version " + gemm_version_name(version) +
                " does not read 16-bit operands (wgmma_in_place, wgmma_repacked, bf16_mma or "
                "tf32_mma do)");
  }
  if (M < 0 || N < 0 || K < 0 || M >= INT32_MAX || N >= INT32_MAX || K >= INT32_MAX - 8) {
    throw Error(who + "sizes " + dims(M, N, K) + " must lie in [0, 2^31 - 8)");
  }
  if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N) {
    throw Error(who + "leading dimensions lda=" + std::to_string(lda) +
                " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) + " too small for " +
                dims(M, N, K) + (trans_a ? " (A^T)" : "") + (trans_b ? " (B^T)" : ""));
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

SlabSplit wgmma_split(int64_t M, int64_t N, int64_t K, int slab_k) {
  const int64_t tiles = ceil_div(M, kWgmmaTileM) * ceil_div(N, kWgmmaTileN);
  const int64_t slabs = ceil_div(K, slab_k);
  const int64_t splits = std::min(sm_count() / tiles, slabs / kMinSlabsPerSplit);
  if (splits < 2) return {};
  const int64_t per_split = ceil_div(slabs, splits);
  return SlabSplit{int(ceil_div(slabs, per_split)), int(per_split), M * N};
}

void sum_parts(Elem out, int M, int N, int splits, const float* parts, float alpha,
               const float* bias, float beta, void* C, int64_t ldc, gpu::Stream stream) {
  const int blocks = blocks_for(int64_t(M) * N);
  if (out == Elem::bf16) {
    sum_parts_kernel<Elem::bf16>
        <<<blocks, kThreads, 0, stream>>>(M, N, splits, parts, alpha, bias, beta, C, ldc);
  } else if (out == Elem::f16) {
    sum_parts_kernel<Elem::f16>
        <<<blocks, kThreads, 0, stream>>>(M, N, splits, parts, alpha, bias, beta, C, ldc);
  } else {
    sum_parts_kernel<Elem::f32>
        <<<blocks, kThreads, 0, stream>>>(M, N, splits, parts, alpha, bias, beta, C, ldc);
  }
  gpu::check_launch("gemm_16bit (sum of parts)");
}

}  // namespace detail

void gemm_16bit(DType operands, DType c_type, bool trans_a, bool trans_b, int64_t M, int64_t N,
                int64_t K, float alpha, const void* A, int64_t lda, const void* B, int64_t ldb,
                float beta, void* C, int64_t ldc, const float* bias, gpu::Stream stream,
                GemmVersion version, float* workspace) {
  using namespace detail;
  check_call(operands, c_type, version, trans_a, trans_b, M, N, K, lda, ldb, ldc);
  const Elem in = elem_of(operands), out = elem_of(c_type);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {  // C = bias + beta C: A and B are not read
    return sum_parts(out, int(M), int(N), 0, nullptr, 0.0f, bias, beta, C, ldc, stream);
  }
  const Plan16 p = make_plan16(trans_a, trans_b, M, N, K, version, lda, ldb);
  if (p.wgmma && !device_is_sm90()) {
    throw Error(std::string("cuda::gemm_16bit: version ") + gemm_version_name(version) +
                " needs a GPU of compute capability 9.0 (H100, H200); use bf16_mma or tf32_mma "
                "(best_16bit_version picks)");
  }
  if (p.floats() > 0 && (workspace == nullptr || !aligned16(workspace))) {
    throw Error("cuda::gemm_16bit: this call (" + dims(M, N, K) + ", trans_a=" +
                std::to_string(int(trans_a)) + ", trans_b=" + std::to_string(int(trans_b)) +
                ", lda=" + std::to_string(lda) + ", ldb=" + std::to_string(ldb) +
                ") needs a 16-byte aligned workspace of gemm_16bit_workspace(...) = " +
                std::to_string(p.floats()) + " floats");
  }
  const auto* a16 = static_cast<const uint16_t*>(A);
  const auto* b16 = static_cast<const uint16_t*>(B);
  if (!p.wgmma) {
    float* wa = workspace;
    float* wb = wa + p.widened_a;
    float* part = wb + p.widened_b;
    widen_operand(in, trans_a ? K : M, trans_a ? M : K, a16, lda, wa, stream);
    widen_operand(in, trans_b ? N : K, trans_b ? K : N, b16, ldb, wb, stream);
    const GemmMath math = version == GemmVersion::bf16_mma ? GemmMath::bf16 : GemmMath::tf32;
    sgemm(trans_a, trans_b, M, N, K, alpha, wa, trans_a ? M : K, wb, trans_b ? K : N, 0.0f, part, N,
          stream, version, math);
    return sum_parts(out, int(M), int(N), 1, part, 1.0f, bias, beta, C, ldc, stream);
  }
  // t4's kernel: operands in place (K-major, or MN-major for wgmma_in_place) or copied K-major.
  const int kp = int(p.repack.kp);
  float* next = workspace;
  if (p.repack.copy_a) {
    auto* copy = reinterpret_cast<uint16_t*>(next);
    repack_16bit(trans_a, int(M), int(K), kp, a16, lda, copy, stream);
    a16 = copy, lda = kp, next += p.repack.a_floats;
  } else if (!aligned16(A) || lda % 8 != 0) {
    throw Error(std::string("cuda::gemm_16bit: A ") + (p.a_mn ? "[K,M]" : "[M,K]") +
                " is read in place and must be 16-byte aligned with lda (" + std::to_string(lda) +
                ") a multiple of 8: the copy engine reads 16-byte units");
  }
  if (p.repack.copy_b) {
    auto* copy = reinterpret_cast<uint16_t*>(next);
    repack_16bit(!trans_b, int(N), int(K), kp, b16, ldb, copy, stream);
    b16 = copy, ldb = kp, next += p.repack.b_floats;
  } else if (!aligned16(B) || ldb % 8 != 0) {
    throw Error(std::string("cuda::gemm_16bit: B ") + (p.b_mn ? "[K,N]" : "[N,K]") +
                " is read in place and must be 16-byte aligned with ldb (" + std::to_string(ldb) +
                ") a multiple of 8: the copy engine reads 16-byte units");
  }
  const int k = int(p.product_k);
  if (p.split.splits > 1) {
    gemm_wgmma_any_major(in, Elem::f32, p.a_mn, p.b_mn, int(M), int(N), k, 1.0f, a16, lda, b16, ldb,
                         0.0f, next, N, nullptr, p.split, stream, false);
    return sum_parts(out, int(M), int(N), p.split.splits, next, alpha, bias, beta, C, ldc, stream);
  }
  // wgmma_in_place runs a persistent grid (the next tile's loads during a tile's store); t5 keeps
  // t4's one tile per block.
  gemm_wgmma_any_major(in, out, p.a_mn, p.b_mn, int(M), int(N), k, alpha, a16, lda, b16, ldb, beta,
                       C, ldc, bias, {}, stream, version == GemmVersion::wgmma_in_place);
}

size_t gemm_16bit_workspace(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            GemmVersion version, int64_t lda, int64_t ldb) {
  return detail::make_plan16(trans_a, trans_b, M, N, K, version, lda, ldb).floats();
}

int gemm_16bit_splits(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      GemmVersion version) {
  return std::max(1, detail::make_plan16(trans_a, trans_b, M, N, K, version).split.splits);
}

GemmVersion best_16bit_version(DType operands) {
  if (detail::device_is_sm90()) return GemmVersion::wgmma_in_place;
  return operands == DType::bf16 ? GemmVersion::bf16_mma : GemmVersion::tf32_mma;
}

}  // namespace crema::kernels::cuda
