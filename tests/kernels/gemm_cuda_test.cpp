// CUDA GEMM: every version in every math it computes in, against ref::gemm<double>, on all four
// transpose combinations, awkward sizes (mixes of 1, 7, 33, 65, 129, 257; K = 1; several tiles and
// pipeline stages), padded leading dimensions, misaligned pointers (the scalar paths beside the
// 16-byte ones), alpha/beta variants with C poisoned by NaN when beta == 0; bit-identical repeats;
// the Tensor-level dispatch in each math.
//
// The tensor-core versions (tf32, bf16) are held to two references: ref::gemm<double> on operands
// rounded as the math says (TF32: round to nearest, ties away, 10 mantissa bits; bf16: round to
// nearest even, 7 bits), within 1e-5 -- fp32 accumulation is all that may differ, so a kernel that
// truncates instead of rounding, or drops a term, fails -- and the exact product, within the
// math's own error (2e-3 TF32, 1e-2 bf16). v9 (wgmma_pipelined) truncates its operands to TF32
// where its TMA path runs (NT, 16-byte aligned, lda, ldb, K multiples of 4): there it is held to
// the product of truncated operands instead, and shown to differ from the rounded one.
// cuda::gemm_bf16 (bf16 operands in memory) is held to the product of the stored bf16 values
// within 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/gemm_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::GemmMath;
using cuda::GemmVersion;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Written into the padding of C (columns N..ldc); the kernels must leave it alone.
constexpr float kSentinel = 12345.0f;

// Every (version, math) pair the library has.
struct Variant {
  GemmVersion version;
  GemmMath math;
};
std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (GemmVersion v : cuda::gemm_versions()) {
    for (GemmMath m : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      if (cuda::supports(v, m)) out.push_back({v, m});
    }
  }
  return out;
}

std::string name(const Variant& v) {
  return std::string(cuda::gemm_version_name(v.version)) + "/" + cuda::gemm_math_name(v.math);
}

// x rounded to the math's operand precision, as the tensor cores see it; `truncate`: TF32 by
// dropping the 13 low mantissa bits (v9's reading of fp32 operands).
float round_operand(float x, GemmMath math, bool truncate = false) {
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
std::vector<float> random_matrix(Random& rng, int64_t rows, int64_t cols, int64_t ld) {
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
  std::vector<double> expected_tf32_truncated;       // v9's TMA path
};

std::vector<double> reference(const Problem& p, GemmMath math, bool truncate = false) {
  std::vector<double> a(p.a.size()), b(p.b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = round_operand(p.a[i], math, truncate);
  for (size_t i = 0; i < b.size(); ++i) b[i] = round_operand(p.b[i], math, truncate);
  std::vector<double> out(p.c0.begin(), p.c0.end());
  ref::gemm<double>(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha, a.data(), p.lda,
                    b.data(), p.ldb, p.c.beta, out.data(), p.ldc);
  return out;
}

Problem make_problem(const Case& c, uint64_t seed) {
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
  p.expected = reference(p, GemmMath::fp32);
  p.expected_tf32 = reference(p, GemmMath::tf32);
  p.expected_bf16 = reference(p, GemmMath::bf16);
  p.expected_tf32_truncated = reference(p, GemmMath::tf32, true);
  return p;
}

Tensor upload(Context& ctx, const std::vector<float>& host, int64_t offset = 0) {
  std::vector<float> shifted(host.size() + size_t(offset), kNaN);
  for (size_t i = 0; i < host.size(); ++i) shifted[size_t(offset) + i] = host[i];
  Tensor t = ctx.empty({int64_t(shifted.size())});
  t.copy_from(Tensor::from_vector({int64_t(shifted.size())}, shifted));
  return t;
}

// The bf16 bit patterns of `m` rounded to nearest even (round_operand's bf16 in the top half),
// uploaded two to a float.
Tensor upload_bf16(Context& ctx, const std::vector<float>& m) {
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

const uint16_t* bf16_data(const Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data<float>());
}

// Runs `version` on device copies (shifted by `offset` floats: offset 1 breaks 16-byte
// alignment) and returns C as stored, padding included.
std::vector<float> run(Context& ctx, const Problem& p, Variant variant, int64_t offset = 0) {
  const Tensor a = upload(ctx, p.a, offset), b = upload(ctx, p.b, offset);
  Tensor c = upload(ctx, p.c0, offset);
  cuda::sgemm(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha, a.data<float>() + offset,
              p.lda, b.data<float>() + offset, p.ldb, p.c.beta, c.data<float>() + offset, p.ldc,
              ctx.stream(), variant.version, variant.math);
  ctx.synchronize();
  std::vector<float> out = c.to_vector();
  out.erase(out.begin(), out.begin() + offset);
  return out;
}

// ||out - expected|| / ||expected|| over C's N columns.
double relative_error(const Problem& p, const std::vector<float>& out,
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

// Whether v9's TMA path (truncating) runs this problem: what gemm.h promises. Device buffers are
// 256-byte aligned, so `offset` floats decide the operands' alignment.
bool truncates(const Problem& p, GemmVersion version, int64_t offset) {
  return version == GemmVersion::wgmma_pipelined && !p.c.trans_a && p.c.trans_b && p.lda % 4 == 0 &&
         p.ldb % 4 == 0 && p.c.K % 4 == 0 && offset % 4 == 0;
}

// The product of the operands as `variant` reads them.
const std::vector<double>& operand_reference(const Problem& p, Variant variant, int64_t offset) {
  if (truncates(p, variant.version, offset)) return p.expected_tf32_truncated;
  return variant.math == GemmMath::tf32 ? p.expected_tf32 : p.expected_bf16;
}

// Every element of C written and finite, the padding untouched, and the error bounds above: fp32
// within 1e-5 of the exact product; tensor-core math within 1e-5 of the product of the operands as
// it reads them (`operands`) and within its own error of the exact one.
void expect_matches(const Problem& p, const std::vector<float>& out, GemmMath math,
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

// `c` in all four transpose combinations, every version in every math.
void check_all_versions(Context& ctx, Case c, uint64_t seed, int64_t offset = 0) {
  for (int t = 0; t < 4; ++t) {
    c.trans_a = t & 1, c.trans_b = t & 2;
    const Problem p = make_problem(c, seed + t);
    for (const Variant& v : all_variants()) {
      expect_matches(p, run(ctx, p, v, offset), v.math, operand_reference(p, v, offset),
                     describe(c) + " " + name(v) + " offset=" + std::to_string(offset));
    }
  }
}

TEST(GemmCuda, AwkwardSizes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t shapes[][3] = {{1, 1, 1},     {1, 257, 33},   {257, 1, 65},   {7, 33, 1},
                               {33, 7, 129},  {65, 129, 7},   {129, 65, 33},  {257, 129, 65},
                               {64, 500, 80}, {65, 257, 257}, {300, 520, 200}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    check_all_versions(ctx, {false, false, s[0], s[1], s[2], 0, 1.0f, 0.0f}, seed += 8);
  }
}

TEST(GemmCuda, LeadingDimensionsAndAlignment) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // Multiples of 4 everywhere: the float4 paths; then a pad of 3 and a base shifted by one float:
  // the scalar paths, with float4 loads illegal.
  check_all_versions(ctx, {false, false, 64, 128, 32, 0, 1.0f, 0.0f}, 100);
  check_all_versions(ctx, {false, false, 33, 65, 129, 3, 1.0f, 0.0f}, 200);
  check_all_versions(ctx, {false, false, 64, 128, 32, 4, 1.0f, 1.0f}, 300, 1);
}

TEST(GemmCuda, AlphaBeta) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // beta == 0 runs on NaN-poisoned C (make_problem); beta != 0 blends with C.
  const float pairs[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}};
  uint64_t seed = 400;
  for (const auto& ab : pairs) {
    check_all_versions(ctx, {false, false, 33, 67, 13, 1, ab[0], ab[1]}, seed += 8);
  }
}

TEST(GemmCuda, DegenerateAlphaAndK) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // alpha == 0 or K == 0: C = beta * C, A and B unread; beta == 0 then overwrites NaN with 0.
  check_all_versions(ctx, {false, false, 9, 10, 11, 0, 0.0f, 0.0f}, 500);
  check_all_versions(ctx, {false, false, 9, 10, 11, 2, 0.0f, 2.0f}, 510);
  check_all_versions(ctx, {false, false, 17, 5, 0, 0, 1.0f, -3.0f}, 520);
  check_all_versions(ctx, {false, false, 17, 5, 0, 1, 1.0f, 0.0f}, 530);
}

TEST(GemmCuda, LeNetShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // The inner-product layers of LeNet at batch 64: fc1 forward, backward data, backward weights
  // (accumulating), fc2 forward.
  const Case cases[] = {{false, true, 64, 500, 800, 0, 1.0f, 0.0f},
                        {false, false, 64, 800, 500, 0, 1.0f, 0.0f},
                        {true, false, 500, 800, 64, 0, 1.0f, 1.0f},
                        {false, true, 64, 10, 500, 0, 1.0f, 0.0f}};
  uint64_t seed = 600;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    for (const Variant& v : all_variants()) {
      expect_matches(p, run(ctx, p, v), v.math, operand_reference(p, v, 0),
                     describe(c) + " " + name(v));
    }
  }
}

TEST(GemmCuda, PipelinedTmaPath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // NT shapes v9's TMA path takes: M, N not dividing its 128 x 256 tile, K from one partial slab
  // (4) to 32 slabs (8 laps of the 4-stage ring), padded rows (NaN past K), alpha/beta blends.
  const Case cases[] = {
      {false, true, 1, 1, 4, 0, 1.0f, 0.0f},         {false, true, 7, 257, 36, 0, 1.0f, 0.0f},
      {false, true, 129, 300, 260, 4, 0.5f, 1.0f},   {false, true, 257, 520, 1000, 0, 1.0f, 0.0f},
      {false, true, 300, 129, 516, 8, -1.5f, 0.25f}, {false, true, 64, 500, 800, 0, 1.0f, 0.0f}};
  const Variant v9{GemmVersion::wgmma_pipelined, GemmMath::tf32};
  uint64_t seed = 650;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    ASSERT_TRUE(truncates(p, v9.version, 0)) << describe(c);
    const std::vector<float> out = run(ctx, p, v9);
    expect_matches(p, out, v9.math, p.expected_tf32_truncated, describe(c));
    // Truncated, not rounded: a v8 fallback (which rounds) would be within 1e-5 of this one.
    if (c.K >= 256) {
      EXPECT_GT(relative_error(p, out, p.expected_tf32), 2e-5) << describe(c);
    }
  }
}

TEST(GemmCuda, Bf16OperandsInMemory) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // NT shapes not dividing v9's 128 x 256 tile, K from one partial slab (8) to 16 slabs (4 laps of
  // the ring), padded rows (NaN past K), alpha/beta blends.
  const Case cases[] = {{false, true, 1, 1, 8, 0, 1.0f, 0.0f},
                        {false, true, 7, 257, 72, 0, 1.0f, 0.0f},
                        {false, true, 129, 300, 264, 8, 0.5f, 1.0f},
                        {false, true, 257, 520, 1000, 0, 1.0f, 0.0f},
                        {false, true, 300, 129, 520, 8, -1.5f, 0.25f}};
  uint64_t seed = 680;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    const Tensor a = upload_bf16(ctx, p.a), b = upload_bf16(ctx, p.b);
    Tensor out = upload(ctx, p.c0);
    cuda::gemm_bf16(false, true, c.M, c.N, c.K, c.alpha, bf16_data(a), p.lda, bf16_data(b), p.ldb,
                    c.beta, out.data<float>(), p.ldc, ctx.stream());
    ctx.synchronize();
    expect_matches(p, out.to_vector(), GemmMath::bf16, p.expected_bf16, describe(c));
  }
  // What it does not take is refused with the reason: another layout, a row of 12 bf16 (24
  // bytes), a base off 16-byte alignment.
  Tensor a = ctx.empty({256}), b = ctx.empty({256}), c = ctx.empty({256});
  const auto expect_refused = [&](bool trans_b, int64_t lda, int64_t offset, const char* why) {
    try {
      cuda::gemm_bf16(false, trans_b, 8, 8, 8, 1.0f, bf16_data(a) + offset, lda, bf16_data(b), 8,
                      0.0f, c.data<float>(), 8, ctx.stream());
      FAIL() << why << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  expect_refused(false, 8, 0, "only A [M,K] times B [N,K]");
  expect_refused(true, 12, 0, "multiples of 8");
  expect_refused(true, 8, 1, "16-byte aligned");
}

TEST(GemmCuda, RepeatsAreBitIdentical) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {{false, true, 64, 500, 800, 0, 1.0f, 0.0f},
                        {true, false, 500, 800, 64, 0, 1.0f, 1.0f},
                        {false, false, 300, 300, 300, 0, 1.0f, 0.0f}};
  uint64_t seed = 700;
  for (const Case& c : cases) {
    const Problem p = make_problem(c, seed += 8);
    for (const Variant& v : all_variants()) {
      const std::vector<float> first = run(ctx, p, v);
      const std::vector<float> second = run(ctx, p, v);
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
          << describe(c) << " " << name(v);
    }
  }
}

TEST(GemmCuda, TensorLevelDispatchInEachMath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case c{false, true, 33, 129, 65, 0, 1.0f, 0.0f};  // c = a * b^T
  const Problem p = make_problem(c, 800);
  const Tensor a_host = Tensor::from_vector({33, 65}, p.a);
  const Tensor b_host = Tensor::from_vector({129, 65}, p.b);
  Tensor a = ctx.empty({33, 65}), b = ctx.empty({129, 65}), out = ctx.empty({33, 129});
  a.copy_from(a_host);
  b.copy_from(b_host);
  for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
    ctx.fill(out, kNaN);
    gemm(ctx, false, true, 1.0f, a, b, 0.0f, out, math);
    ctx.synchronize();
    const std::vector<double>& operands = math == GemmMath::tf32   ? p.expected_tf32
                                          : math == GemmMath::bf16 ? p.expected_bf16
                                                                   : p.expected;
    expect_matches(p, out.to_vector(), math, operands,
                   std::string("gemm ") + cuda::gemm_math_name(math));
  }
  // A host tensor on a GPU context is the user's mistake, named in the message.
  try {
    gemm(ctx, false, true, 1.0f, a_host, b, 0.0f, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the context runs on cuda:0"), std::string::npos)
        << e.what();
  }
}

TEST(GemmCuda, VersionOutsideItsMathThrows) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor a = ctx.empty({8, 8}), b = ctx.empty({8, 8}), c = ctx.empty({8, 8});
  const Variant wrong[] = {{GemmVersion::tf32_mma, GemmMath::fp32},
                           {GemmVersion::adaptive_tiles, GemmMath::bf16},
                           {GemmVersion::wgmma, GemmMath::fp32}};
  for (const Variant& v : wrong) {
    try {
      cuda::sgemm(false, false, 8, 8, 8, 1.0f, a.data<float>(), 8, b.data<float>(), 8, 0.0f,
                  c.data<float>(), 8, ctx.stream(), v.version, v.math);
      FAIL() << name(v) << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not compute in"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace crema::kernels
