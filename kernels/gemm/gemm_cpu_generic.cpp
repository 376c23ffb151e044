// Generic kernel set: a 4 x 8 register tile and scalar packing in plain C++, for CPUs without
// AVX2 (and, in the tests, an independently written path to compare the vector ones against).
// The compiler keeps the 4 x 8 accumulators in registers and vectorizes the j loops with the
// baseline ISA (SSE2 on x86-64).
#include <algorithm>
#include <utility>

#include "kernels/gemm/gemm_cpu_internal.h"

namespace crema::kernels::cpu::gemm_internal {
namespace {

constexpr int kMR = 4;
constexpr int kNR = 8;

template <int Rows>
void microkernel(int64_t kc, float alpha, const float* a, const float* b, float beta, float* c,
                 int64_t ldc, int64_t cols) {
  float acc[Rows][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * kNR;
#pragma GCC unroll 4
    for (int i = 0; i < Rows; ++i) {
      const float ai = a[p * kMR + i];
#pragma GCC unroll 8
      for (int j = 0; j < kNR; ++j) acc[i][j] += ai * bp[j];
    }
  }
  for (int i = 0; i < Rows; ++i) {
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) {
      ci[j] = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * ci[j];
    }
  }
}

void pack_a(bool trans_a, const float* a, int64_t lda, int64_t mc, int64_t kc, float* out) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t rows = std::min<int64_t>(kMR, mc - ir);
    float* panel = out + ir * kc;
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < rows; ++i) {
        panel[p * kMR + i] = trans_a ? a[p * lda + ir + i] : a[(ir + i) * lda + p];
      }
    }
  }
}

void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t kc, int64_t nc, float* out) {
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min<int64_t>(kNR, nc - jr);
    float* panel = out + jr * kc;
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t j = 0; j < kNR; ++j) {
        const int64_t col = jr + j;
        panel[p * kNR + j] = j >= cols ? 0.0f : trans_b ? b[col * ldb + p] : b[p * ldb + col];
      }
    }
  }
}

template <int... R>
KernelSet make_set(std::integer_sequence<int, R...>) {
  return KernelSet{"generic", kMR, kNR, 256, 128, 4096, &pack_a, &pack_b, {&microkernel<R + 1>...}};
}

}  // namespace

const KernelSet& generic_kernels() {
  static const KernelSet set = make_set(std::make_integer_sequence<int, kMR>());
  return set;
}

}  // namespace crema::kernels::cpu::gemm_internal
