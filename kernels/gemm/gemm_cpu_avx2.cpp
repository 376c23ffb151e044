// AVX2 + FMA kernel set: a 6 x 16 register tile, and packing that transposes 8 x 8 in registers.
//
// Microkernel: each step p loads one row of the packed B micro-panel (16 floats = 2 ymm),
// broadcasts the 6 values op(A)[i,p] and issues 12 FMAs; 12 accumulators + 2 B vectors + 1
// broadcast fit the 16 ymm registers (the classic Haswell shape of BLIS and OpenBLAS).
//
// Everything here is compiled with __attribute__((target("avx2,fma"))); the driver calls these
// only after checking the CPU (gemm_internal::isa_supported).
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "kernels/gemm/gemm_cpu_internal.h"

#define CREMA_AVX2 __attribute__((target("avx2,fma")))
// For the transpose helpers, which must be inlined to keep their vectors in registers.
#define CREMA_AVX2_INLINE inline __attribute__((target("avx2,fma"), always_inline))

namespace crema::kernels::cpu::gemm_internal {
namespace {

constexpr int kMR = 6;
constexpr int kVecs = 2;  // ymm vectors per tile row
constexpr int kNR = 8 * kVecs;

// A maskload/maskstore mask selecting the low n lanes (n clamped to [0, 8]).
CREMA_AVX2 __m256i first_lanes(int64_t n) {
  const int clamped = int(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(clamped), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// gemm_cpu_avx512.cpp's loop on ymm registers, written out per ISA on purpose (that file says
// why: target attributes and inlining).
template <int Rows>
CREMA_AVX2 void microkernel(int64_t kc, float alpha, const float* a, const float* b, float beta,
                            float* c, int64_t ldc, int64_t cols) {
  __m256 acc[Rows][kVecs];
#pragma GCC unroll 8
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) bv[v] = _mm256_load_ps(b + p * kNR + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < Rows; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + p * kMR + i);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  // Columns past `cols` are masked off, so edge tiles need no separate path.
  __m256i mask[kVecs];
  for (int v = 0; v < kVecs; ++v) mask[v] = first_lanes(cols - 8 * v);
  const __m256 valpha = _mm256_set1_ps(alpha);
  const __m256 vbeta = _mm256_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      float* ci = c + i * ldc + 8 * v;
      __m256 x = _mm256_mul_ps(valpha, acc[i][v]);
      if (beta != 0.0f) x = _mm256_fmadd_ps(vbeta, _mm256_maskload_ps(ci, mask[v]), x);
      _mm256_maskstore_ps(ci, mask[v], x);
    }
  }
}

// In-register transpose: r[i] lane j becomes r[j] lane i (unpack, shuffle, swap 128-bit halves).
CREMA_AVX2_INLINE void transpose8x8(__m256 r[8]) {
  __m256 t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}

// Transposes `rows` <= 8 stored rows of `len` <= 8 consecutive elements (src[i * ld + q]) into
// out[q * out_stride + i] for q < len, writing the lanes selected by `store`.
CREMA_AVX2_INLINE void transpose_block(const float* src, int64_t ld, int64_t rows, int64_t len,
                                       float* out, int64_t out_stride, __m256i store) {
  const __m256i load = first_lanes(len);
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = i < rows ? _mm256_maskload_ps(src + i * ld, load) : _mm256_setzero_ps();
  }
  transpose8x8(r);
  for (int64_t q = 0; q < len; ++q) _mm256_maskstore_ps(out + q * out_stride, store, r[q]);
}

CREMA_AVX2 void pack_a(bool trans_a, const float* a, int64_t lda, int64_t mc, int64_t kc,
                       float* out) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t rows = std::min<int64_t>(kMR, mc - ir);
    const __m256i lanes = first_lanes(rows);
    float* panel = out + ir * kc;
    if (trans_a) {  // stored [K, M]: step p is `rows` contiguous floats
      const float* src = a + ir;
      for (int64_t p = 0; p < kc; ++p) {
        _mm256_maskstore_ps(panel + p * kMR, lanes, _mm256_maskload_ps(src + p * lda, lanes));
      }
    } else {  // stored [M, K]: rows of A become the columns of the panel
      const float* src = a + ir * lda;
      for (int64_t p = 0; p < kc; p += 8) {
        transpose_block(src + p, lda, rows, std::min<int64_t>(8, kc - p), panel + p * kMR, kMR,
                        lanes);
      }
    }
  }
}

CREMA_AVX2 void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t kc, int64_t nc,
                       float* out) {
  const __m256i all = first_lanes(8);
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min<int64_t>(kNR, nc - jr);
    float* panel = out + jr * kc;
    if (!trans_b) {  // stored [K, N]: step p is `cols` contiguous floats, zero-extended to NR
      __m256i lanes[kVecs];
      for (int v = 0; v < kVecs; ++v) lanes[v] = first_lanes(cols - 8 * v);
      const float* src = b + jr;
      for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) {
          _mm256_store_ps(panel + p * kNR + 8 * v,
                          _mm256_maskload_ps(src + p * ldb + 8 * v, lanes[v]));
        }
      }
    } else {  // stored [N, K]: rows of B become the columns of the panel, 8 at a time
      for (int64_t h = 0; h < kVecs; ++h) {
        const float* src = b + (jr + 8 * h) * ldb;
        const int64_t rows = std::clamp<int64_t>(cols - 8 * h, 0, 8);
        for (int64_t p = 0; p < kc; p += 8) {
          transpose_block(src + p, ldb, rows, std::min<int64_t>(8, kc - p), panel + p * kNR + 8 * h,
                          kNR, all);
        }
      }
    }
  }
}

template <int... R>
KernelSet make_set(std::integer_sequence<int, R...>) {
  return KernelSet{
      "avx2-fma", kMR, kNR, 256, 168, 4096, &pack_a, &pack_b, {&microkernel<R + 1>...}};
}

}  // namespace

const KernelSet& avx2_fma_kernels() {
  static const KernelSet set = make_set(std::make_integer_sequence<int, kMR>());
  return set;
}

}  // namespace crema::kernels::cpu::gemm_internal
