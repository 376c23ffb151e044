// CUDA SGEMM: every version against ref::gemm<double> on all four transpose combinations, awkward
// sizes (mixes of 1, 7, 33, 65, 129, 257; K = 1), padded leading dimensions, misaligned pointers
// (the scalar paths beside the float4 ones), alpha/beta variants with C poisoned by NaN when
// beta == 0; bit-identical repeats; the Tensor-level dispatch.
#include <gtest/gtest.h>

#include <cmath>
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

using cuda::GemmVersion;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Written into the padding of C (columns N..ldc); the kernels must leave it alone.
constexpr float kSentinel = 12345.0f;

const GemmVersion kVersions[] = {GemmVersion::naive, GemmVersion::shared_tiles,
                                 GemmVersion::register_tiles, GemmVersion::adaptive_tiles};

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
  std::vector<double> expected;
};

Problem make_problem(const Case& c, uint64_t seed) {
  Random rng(seed);
  Problem p{
      c, (c.trans_a ? c.M : c.K) + c.pad, (c.trans_b ? c.K : c.N) + c.pad, c.N + c.pad, {}, {}, {},
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
  const std::vector<double> a(p.a.begin(), p.a.end()), b(p.b.begin(), p.b.end());
  p.expected.assign(p.c0.begin(), p.c0.end());
  ref::gemm<double>(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, a.data(), p.lda, b.data(), p.ldb,
                    c.beta, p.expected.data(), p.ldc);
  return p;
}

Tensor upload(Context& ctx, const std::vector<float>& host, int64_t offset = 0) {
  std::vector<float> shifted(host.size() + size_t(offset), kNaN);
  for (size_t i = 0; i < host.size(); ++i) shifted[size_t(offset) + i] = host[i];
  Tensor t = ctx.empty({int64_t(shifted.size())});
  t.copy_from(Tensor::from_vector({int64_t(shifted.size())}, shifted));
  return t;
}

// Runs `version` on device copies (shifted by `offset` floats: offset 1 breaks 16-byte
// alignment) and returns C as stored, padding included.
std::vector<float> run(Context& ctx, const Problem& p, GemmVersion version, int64_t offset = 0) {
  const Tensor a = upload(ctx, p.a, offset), b = upload(ctx, p.b, offset);
  Tensor c = upload(ctx, p.c0, offset);
  cuda::sgemm(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha, a.data<float>() + offset,
              p.lda, b.data<float>() + offset, p.ldb, p.c.beta, c.data<float>() + offset, p.ldc,
              ctx.stream(), version);
  ctx.synchronize();
  std::vector<float> out = c.to_vector();
  out.erase(out.begin(), out.begin() + offset);
  return out;
}

// Every element of C written and finite, the padding untouched, ||C - ref|| / ||ref|| < 1e-5.
void expect_matches(const Problem& p, const std::vector<float>& out, const std::string& what) {
  double diff = 0, norm = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < p.c.M; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const size_t at = size_t(i * p.ldc + j);
      if (j >= p.c.N) {
        bad += out[at] != kSentinel;
        continue;
      }
      bad += !std::isfinite(out[at]);
      diff += (out[at] - p.expected[at]) * (out[at] - p.expected[at]);
      norm += p.expected[at] * p.expected[at];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": elements not written, not finite, or padding overwritten";
  EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-30) << what;
}

// `c` in all four transpose combinations, every version.
void check_all_versions(Context& ctx, Case c, uint64_t seed, int64_t offset = 0) {
  for (int t = 0; t < 4; ++t) {
    c.trans_a = t & 1, c.trans_b = t & 2;
    const Problem p = make_problem(c, seed + t);
    for (GemmVersion v : kVersions) {
      expect_matches(
          p, run(ctx, p, v, offset),
          describe(c) + " v" + std::to_string(int(v)) + " offset=" + std::to_string(offset));
    }
  }
}

TEST(GemmCuda, AwkwardSizes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t shapes[][3] = {{1, 1, 1},     {1, 257, 33},  {257, 1, 65},  {7, 33, 1},
                               {33, 7, 129},  {65, 129, 7},  {129, 65, 33}, {257, 129, 65},
                               {64, 500, 80}, {65, 257, 257}};
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
    for (GemmVersion v : kVersions) {
      expect_matches(p, run(ctx, p, v), describe(c) + " v" + std::to_string(int(v)));
    }
  }
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
    const std::vector<float> first = run(ctx, p, GemmVersion::best);
    const std::vector<float> second = run(ctx, p, GemmVersion::best);
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
        << describe(c);
  }
}

TEST(GemmCuda, TensorLevelDispatchAndDeviceChecks) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(800);
  const Tensor a_host = Tensor::from_vector({33, 65}, random_matrix(rng, 33, 65, 65));
  const Tensor b_host = Tensor::from_vector({129, 65}, random_matrix(rng, 129, 65, 65));
  Tensor a = ctx.empty({33, 65}), b = ctx.empty({129, 65}), c = ctx.empty({33, 129});
  a.copy_from(a_host);
  b.copy_from(b_host);
  ctx.fill(c, kNaN);
  gemm(ctx, false, true, 1.0f, a, b, 0.0f, c);  // c = a * b^T
  ctx.synchronize();
  const std::vector<float> av = a_host.to_vector(), bv = b_host.to_vector();
  const std::vector<double> ad(av.begin(), av.end()), bd(bv.begin(), bv.end());
  std::vector<double> expected(33 * 129);
  ref::gemm<double>(false, true, 33, 129, 65, 1.0, ad.data(), 65, bd.data(), 65, 0.0,
                    expected.data(), 129);
  const std::vector<float> out = c.to_vector();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    diff += (out[i] - expected[i]) * (out[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-5);
  // A host tensor on a GPU context is the user's mistake, named in the message.
  try {
    gemm(ctx, false, true, 1.0f, a_host, b, 0.0f, c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the context runs on cuda:0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
