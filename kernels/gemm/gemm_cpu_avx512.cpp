// AVX-512 kernel set: a 14 x 32 register tile, and packing that transposes 16 x 16 in registers.
//
// Microkernel: each step p of the k loop loads one row of the packed B micro-panel (32 floats =
// 2 zmm) and, for each of the 14 rows, broadcasts op(A)[i,p] and issues 2 FMAs: 28 FMAs for 2
// loads and 14 broadcasts, enough independent accumulators to hide the FMA latency on both FMA
// pipes. 28 accumulators + 2 B vectors + 1 broadcast fit the 32 zmm registers without spilling.
//
// Everything here is compiled with __attribute__((target("avx512f"))), so the library needs no
// -mavx512f; the driver calls these only after checking the CPU (gemm_internal::isa_supported).
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "kernels/gemm/gemm_cpu_internal.h"

#define CREMA_AVX512 __attribute__((target("avx512f")))
// For the transpose helpers, which must be inlined to keep their vectors in registers.
#define CREMA_AVX512_INLINE inline __attribute__((target("avx512f"), always_inline))

namespace crema::kernels::cpu::gemm_internal {
namespace {

constexpr int kMR = 14;
constexpr int kVecs = 2;  // zmm vectors per tile row
constexpr int kNR = 16 * kVecs;
constexpr __mmask16 kAll = 0xFFFF;

// The low n lanes (n clamped to [0, 16]).
CREMA_AVX512 __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? kAll : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// The same loop as gemm_cpu_avx2.cpp's microkernel (and its packing the same shape), written out
// per ISA on purpose: every function here carries target("avx512f"), and GCC inlines an
// intrinsic only into a function of its own target, so a loop shared between the ISAs would need
// a wrapper per ISA for each load, broadcast, FMA and masked store -- as much code as the loop,
// and the inlining the 28-accumulator tile relies on would hang on every one of them.
template <int Rows>
CREMA_AVX512 void microkernel(int64_t kc, float alpha, const float* a, const float* b, float beta,
                              float* c, int64_t ldc, int64_t cols) {
  __m512 acc[Rows][kVecs];
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) bv[v] = _mm512_load_ps(b + p * kNR + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < Rows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[p * kMR + i]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  // Columns past `cols` are masked off, so edge tiles need no separate path.
  __mmask16 mask[kVecs];
  for (int v = 0; v < kVecs; ++v) mask[v] = first_lanes(cols - 16 * v);
  const __m512 valpha = _mm512_set1_ps(alpha);
  const __m512 vbeta = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < Rows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      float* ci = c + i * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(valpha, acc[i][v]);
      if (beta != 0.0f) x = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(mask[v], ci), x);
      _mm512_mask_storeu_ps(ci, mask[v], x);
    }
  }
}

// In-register transpose: r[i] lane j becomes r[j] lane i. Pairs of rows are interleaved, then
// pairs of pairs, then 128-bit lanes are exchanged twice (the usual unpack/shuffle network).
// The maskz_ forms with every lane selected compile to the plain instructions; the plain
// intrinsics pass an undefined operand that GCC 12 reports as uninitialized in target code.
CREMA_AVX512_INLINE void transpose16x16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0xdd);
  }
}

// Transposes a block of `rows` <= 16 stored rows and `len` <= 16 consecutive elements of each
// (src[i * ld + q]) into out[q * out_stride + i] for q < len; `store` writes the lanes i that
// belong to the panel (all 16, or the first `rows` of them).
CREMA_AVX512_INLINE void transpose_block(const float* src, int64_t ld, int64_t rows, int64_t len,
                                         float* out, int64_t out_stride, __mmask16 store) {
  const __mmask16 load = first_lanes(len);
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    r[i] = i < rows ? _mm512_maskz_loadu_ps(load, src + i * ld) : _mm512_setzero_ps();
  }
  transpose16x16(r);
  for (int64_t q = 0; q < len; ++q) _mm512_mask_storeu_ps(out + q * out_stride, store, r[q]);
}

CREMA_AVX512 void pack_a(bool trans_a, const float* a, int64_t lda, int64_t mc, int64_t kc,
                         float* out) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t rows = std::min<int64_t>(kMR, mc - ir);
    const __mmask16 lanes = first_lanes(rows);
    float* panel = out + ir * kc;
    if (trans_a) {  // stored [K, M]: step p is `rows` contiguous floats
      const float* src = a + ir;
      for (int64_t p = 0; p < kc; ++p) {
        _mm512_mask_storeu_ps(panel + p * kMR, lanes, _mm512_maskz_loadu_ps(lanes, src + p * lda));
      }
    } else {  // stored [M, K]: rows of A become the columns of the panel
      const float* src = a + ir * lda;
      for (int64_t p = 0; p < kc; p += 16) {
        transpose_block(src + p, lda, rows, std::min<int64_t>(16, kc - p), panel + p * kMR, kMR,
                        lanes);
      }
    }
  }
}

CREMA_AVX512 void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t kc, int64_t nc,
                         float* out) {
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min<int64_t>(kNR, nc - jr);
    float* panel = out + jr * kc;
    if (!trans_b) {  // stored [K, N]: step p is `cols` contiguous floats, zero-extended to NR
      __mmask16 lanes[kVecs];
      for (int v = 0; v < kVecs; ++v) lanes[v] = first_lanes(cols - 16 * v);
      const float* src = b + jr;
      for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) {
          _mm512_store_ps(panel + p * kNR + 16 * v,
                          _mm512_maskz_loadu_ps(lanes[v], src + p * ldb + 16 * v));
        }
      }
    } else {  // stored [N, K]: rows of B become the columns of the panel, 16 at a time
      for (int64_t h = 0; h < kVecs; ++h) {
        const float* src = b + (jr + 16 * h) * ldb;
        const int64_t rows = std::clamp<int64_t>(cols - 16 * h, 0, 16);
        for (int64_t p = 0; p < kc; p += 16) {
          transpose_block(src + p, ldb, rows, std::min<int64_t>(16, kc - p),
                          panel + p * kNR + 16 * h, kNR, kAll);
        }
      }
    }
  }
}

template <int... R>
KernelSet make_set(std::integer_sequence<int, R...>) {
  return KernelSet{"avx512", kMR, kNR, 512, 112, 4096, &pack_a, &pack_b, {&microkernel<R + 1>...}};
}

}  // namespace

const KernelSet& avx512_kernels() {
  static const KernelSet set = make_set(std::make_integer_sequence<int, kMR>());
  return set;
}

}  // namespace crema::kernels::cpu::gemm_internal
