// Shared by the CUDA GEMM tests (gemm_cuda_test.cpp: every version in every math on awkward
// shapes; gemm_tensor_core_cuda_test.cpp: the TMA-fed tensor-core paths): problems with random
// operands, NaN-poisoned C and padding sentinels, their double-precision references (exact, and
// on operands rounded or truncated as each math reads them), a runner for any (version, math)
// with its NaN-poisoned workspace, and the checks (expect_matches):
//
// The tensor-core versions (tf32, bf16) are held to two references: ref::gemm<double> on operands
// rounded as the math says (TF32: round to nearest, ties away, 10 mantissa bits; bf16: round to
// nearest even, 7 bits), within 1e-5 -- fp32 accumulation is all that may differ, so a kernel that
// truncates instead of rounding, or drops a term, fails -- and the exact product, within the
// math's own error (2e-3 TF32, 1e-2 bf16). t4 (wgmma_pipelined) truncates its operands to TF32
// where its TMA path runs (NT, 16-byte aligned, lda, ldb, K multiples of 4): there it is held to
// the product of truncated operands instead, and shown to differ from the rounded one.
// cuda::gemm_bf16 (bf16 operands in memory) is held to the product of the stored bf16 values
// within 1e-5.
#include <gtest/gtest.h>
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ladder/gemm_ladder.h"
#include "tests/kernels/gemm_test_util.h"

namespace crema::kernels::gemm_testing {

using cuda::GemmMath;
using cuda::ladder::Rung;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Written into the padding of C (columns N..ldc); the kernels must leave it alone.
constexpr float kSentinel = 12345.0f;

// Every (rung, math) pair of the ladder, production's and ladder/'s.
struct Variant {
  Rung rung;
  GemmMath math;
};
inline std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (Rung r : cuda::ladder::rungs()) {
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      if (cuda::ladder::supports(r, m)) out.push_back({r, m});
    }
  }
  return out;
}

inline std::string name(const Variant& v) {
  return std::string(cuda::ladder::name(v.rung)) + "/" + cuda::gemm_math_name(v.math);
}

// x rounded to the math's operand precision, as the tensor cores see it; `truncate`: TF32 by
// dropping the 13 low mantissa bits (t4's reading of fp32 operands).
inline float round_operand(float x, GemmMath math, bool truncate = false) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (math == GemmMath::tf32 && truncate) {
    u &= 0xffffe000u;
  } else if (math == GemmMath::tf32) {
    u = (u + 0x1000u) & 0xffffe000u;  // ties away from zero: add half an ulp of 10 bits, truncate
  } else if (math == GemmMath::bf16) {
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // ties to even
  }
  std::memcpy(&x, &u, 4);
  return x;
}

using testing::Case;
using testing::describe;

// A rows x cols matrix stored with leading dimension ld, padding NaN (a kernel reading past a row
// contaminates its result).
inline std::vector<float> random_matrix(Random& rng, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> m(size_t(std::max<int64_t>(1, rows * ld)), kNaN);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) m[size_t(i * ld + j)] = float(rng.uniform(-1.0, 1.0));
  }
  return m;
}

// Host inputs, C before the call, and the double-precision expectation.
struct Problem {
  Case c;
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c0;
  std::vector<double> expected;                      // exact operands
  std::vector<double> expected_tf32, expected_bf16;  // operands rounded as the math does
  std::vector<double> expected_tf32_truncated;       // t4's TMA path
};

inline std::vector<double> reference(const Problem& p, GemmMath math, bool truncate = false) {
  std::vector<double> a(p.a.size()), b(p.b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = round_operand(p.a[i], math, truncate);
  for (size_t i = 0; i < b.size(); ++i) b[i] = round_operand(p.b[i], math, truncate);
  std::vector<double> out(p.c0.begin(), p.c0.end());
  ref::gemm<double>(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha, a.data(), p.lda,
                    b.data(), p.ldb, p.c.beta, out.data(), p.ldc);
  return out;
}

// The four expectations of a problem whose operands and C are set.
inline void add_references(Problem& p) {
  p.expected = reference(p, GemmMath::fp32);
  p.expected_tf32 = reference(p, GemmMath::tf32);
  p.expected_bf16 = reference(p, GemmMath::bf16);
  p.expected_tf32_truncated = reference(p, GemmMath::tf32, true);
}

// Random operands, C poisoned as the case says, and (unless with_references is false: a large
// problem checked on some rows) the references.
inline Problem make_problem(const Case& c, uint64_t seed, bool with_references = true) {
  Random rng(seed);
  Problem p{c,
            (c.trans_a ? c.M : c.K) + c.pad,
            (c.trans_b ? c.K : c.N) + c.pad,
            c.N + c.pad,
            {},
            {},
            {},
            {},
            {},
            {},
            {}};
  p.a = random_matrix(rng, c.trans_a ? c.K : c.M, c.trans_a ? c.M : c.K, p.lda);
  p.b = random_matrix(rng, c.trans_b ? c.N : c.K, c.trans_b ? c.K : c.N, p.ldb);
  p.c0 = random_matrix(rng, c.M, c.N, p.ldc);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      float& v = p.c0[size_t(i * p.ldc + j)];
      if (j >= c.N)
        v = kSentinel;
      else if (c.beta == 0.0f)
        v = kNaN;
    }
  }
  if (with_references) add_references(p);
  return p;
}

inline Tensor upload(Context& ctx, const std::vector<float>& host, int64_t offset = 0) {
  std::vector<float> shifted(host.size() + size_t(offset), kNaN);
  for (size_t i = 0; i < host.size(); ++i) shifted[size_t(offset) + i] = host[i];
  Tensor t = ctx.empty({int64_t(shifted.size())});
  t.copy_from(Tensor::from_vector({int64_t(shifted.size())}, shifted));
  return t;
}

// The bf16 bit patterns of `m` rounded to nearest even (round_operand's bf16 in the top half),
// uploaded two to a float.
inline Tensor upload_bf16(Context& ctx, const std::vector<float>& m) {
  std::vector<uint16_t> bits(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const float r = round_operand(m[i], GemmMath::bf16);
    uint32_t u;
    std::memcpy(&u, &r, 4);
    bits[i] = uint16_t(u >> 16);
  }
  std::vector<float> packed((bits.size() + 1) / 2, 0.0f);
  std::memcpy(packed.data(), bits.data(), bits.size() * sizeof(uint16_t));
  Tensor t = ctx.empty({int64_t(packed.size())});
  t.copy_from(Tensor::from_vector({int64_t(packed.size())}, packed));
  return t;
}

inline const uint16_t* bf16_data(const Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data<float>());
}

// Runs the variant on device copies (shifted by `offset` floats: offset 1 breaks 16-byte
// alignment), with the workspace it asks for (NaN-poisoned: what it reads it must have written)
// unless `no_workspace`, and returns C as stored, padding included.
inline std::vector<float> run(Context& ctx, const Problem& p, Variant variant, int64_t offset = 0,
                              bool no_workspace = false) {
  const Tensor a = upload(ctx, p.a, offset), b = upload(ctx, p.b, offset);
  Tensor c = upload(ctx, p.c0, offset);
  const size_t floats = cuda::ladder::sgemm_workspace(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K,
                                                      variant.rung, variant.math);
  Tensor workspace = ctx.empty({int64_t(std::max<size_t>(floats, 1))});
  ctx.fill(workspace, kNaN);
  cuda::ladder::sgemm(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha,
                      a.data<float>() + offset, p.lda, b.data<float>() + offset, p.ldb, p.c.beta,
                      c.data<float>() + offset, p.ldc, ctx.stream(), variant.rung, variant.math,
                      floats > 0 && !no_workspace ? workspace.data<float>() : nullptr);
  ctx.synchronize();
  std::vector<float> out = c.to_vector();
  out.erase(out.begin(), out.begin() + offset);
  return out;
}

// ||out - expected|| / ||expected|| over C's N columns.
inline double relative_error(const Problem& p, const std::vector<float>& out,
                             const std::vector<double>& expected) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < p.c.M; ++i) {
    for (int64_t j = 0; j < p.c.N; ++j) {
      const size_t at = size_t(i * p.ldc + j);
      diff += (out[at] - expected[at]) * (out[at] - expected[at]);
      norm += expected[at] * expected[at];
    }
  }
  return std::sqrt(diff) / (std::sqrt(norm) + 1e-30);
}

// Whether t4's kernel (truncating TF32) runs this problem: what gemm.h promises. Device buffers are
// 256-byte aligned, so `offset` floats decide the operands' alignment. t4 reads both operands in
// place; t5 with its workspace copies A when trans_a, B when !trans_b, both when K % 4 != 0, and
// reads the others in place (else it runs t4, which then runs t3).
inline bool truncates(const Problem& p, Variant v, int64_t offset, bool no_workspace = false) {
  if (v.math != GemmMath::tf32) return false;
  const bool ragged = p.c.K % 4 != 0, aligned = offset % 4 == 0;
  bool copy_a = false, copy_b = false;
  if (v.rung == Rung::wgmma_repacked && !no_workspace) {
    copy_a = p.c.trans_a || ragged;
    copy_b = !p.c.trans_b || ragged;
  } else if (v.rung != Rung::wgmma_pipelined && v.rung != Rung::wgmma_repacked) {
    return false;
  }
  const bool a_ok = copy_a || (!p.c.trans_a && !ragged && p.lda % 4 == 0 && aligned);
  const bool b_ok = copy_b || (p.c.trans_b && !ragged && p.ldb % 4 == 0 && aligned);
  return a_ok && b_ok;
}

// The product of the operands as `variant` reads them.
inline const std::vector<double>& operand_reference(const Problem& p, Variant variant,
                                                    int64_t offset, bool no_workspace = false) {
  if (truncates(p, variant, offset, no_workspace)) return p.expected_tf32_truncated;
  return variant.math == GemmMath::tf32 ? p.expected_tf32 : p.expected_bf16;
}

// Every element of C written and finite, the padding untouched, and the error bounds above: fp32
// within 1e-5 of the exact product; tensor-core math within 1e-5 of the product of the operands as
// it reads them (`operands`) and within its own error of the exact one.
inline void expect_matches(const Problem& p, const std::vector<float>& out, GemmMath math,
                           const std::vector<double>& operands, const std::string& what) {
  int64_t bad = 0;
  for (int64_t i = 0; i < p.c.M; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const float v = out[size_t(i * p.ldc + j)];
      bad += j >= p.c.N ? v != kSentinel : !std::isfinite(v);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": elements not written, not finite, or padding overwritten";
  if (math == GemmMath::fp32) {
    EXPECT_LE(relative_error(p, out, p.expected), 1e-5) << what;
    return;
  }
  const bool tf32 = math == GemmMath::tf32;
  EXPECT_LE(relative_error(p, out, operands), 1e-5) << what;
  EXPECT_LE(relative_error(p, out, p.expected), tf32 ? 2e-3 : 1e-2) << what;
}

// `c` in all four transpose combinations, every rung in every math.
inline void check_all_versions(Context& ctx, Case c, uint64_t seed, int64_t offset = 0) {
  for (int t = 0; t < 4; ++t) {
    c.trans_a = t & 1, c.trans_b = t & 2;
    const Problem p = make_problem(c, seed + t);
    for (const Variant& v : all_variants()) {
      expect_matches(p, run(ctx, p, v, offset), v.math, operand_reference(p, v, offset),
                     describe(c) + " " + name(v) + " offset=" + std::to_string(offset));
    }
  }
}

}  // namespace crema::kernels::gemm_testing
