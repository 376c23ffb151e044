// GEMM: the reference against hand-computed products, and every CPU microkernel this machine can
// run (AVX-512, AVX2+FMA, generic) against ref::gemm<double> on all four transpose combinations,
// awkward sizes, padded leading dimensions, alpha/beta variants and 1-3 threads.
#include "kernels/gemm/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/gemm/gemm_cpu_internal.h"
#include "tests/kernels/gemm_test_util.h"

namespace crema::kernels {
namespace {

namespace gi = cpu::gemm_internal;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Written into the padding of C (columns N..ldc); the kernels must leave it alone.
constexpr float kSentinel = 12345.0f;

// A stored rows x cols matrix with leading dimension ld >= cols. The padding columns hold NaN, so
// a kernel that reads past a row contaminates its result and fails the comparison.
struct Matrix {
  int64_t rows, cols, ld;
  std::vector<float> values;
  const float* data() const { return values.data(); }
};

Matrix random_matrix(Random& rng, int64_t rows, int64_t cols, int64_t ld) {
  Matrix m{rows, cols, ld, std::vector<float>(size_t(std::max<int64_t>(1, rows * ld)), kNaN)};
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) m.values[i * ld + j] = float(rng.uniform(-1.0, 1.0));
  }
  return m;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

using testing::Case;
using testing::describe;

// Inputs of one case and the double-precision reference result.
struct Problem {
  Case c;
  Matrix a, b, c0;  // c0: C before the call (NaN everywhere when beta == 0)
  std::vector<double> expected;
};

Problem make_problem(const Case& c, uint64_t seed) {
  Random rng(seed);
  Problem p{c, {}, {}, {}, {}};
  p.a = c.trans_a ? random_matrix(rng, c.K, c.M, c.M + c.pad)
                  : random_matrix(rng, c.M, c.K, c.K + c.pad);
  p.b = c.trans_b ? random_matrix(rng, c.N, c.K, c.K + c.pad)
                  : random_matrix(rng, c.K, c.N, c.N + c.pad);
  p.c0 = random_matrix(rng, c.M, c.N, c.N + c.pad);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < p.c0.ld; ++j) p.c0.values[i * p.c0.ld + j] = kSentinel;
    if (c.beta == 0.0f) {
      for (int64_t j = 0; j < c.N; ++j) p.c0.values[i * p.c0.ld + j] = kNaN;
    }
  }
  // NaN in A, B or C is ignored by the reference exactly where the fast path must ignore it.
  std::vector<double> a = to_double(p.a.values), b = to_double(p.b.values);
  p.expected = to_double(p.c0.values);
  ref::gemm<double>(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, a.data(), p.a.ld, b.data(),
                    p.b.ld, c.beta, p.expected.data(), p.c0.ld);
  return p;
}

// Every element of C written and finite, the padding untouched, and ||C - ref|| / ||ref|| small.
void expect_matches(const Problem& p, const std::vector<float>& out, const std::string& what) {
  double diff = 0, norm = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < p.c.M; ++i) {
    for (int64_t j = 0; j < p.c0.ld; ++j) {
      const size_t at = size_t(i * p.c0.ld + j);
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

void run_isa(gi::Isa isa, const Problem& p, int threads) {
  const Case& c = p.c;
  std::vector<float> out = p.c0.values;
  gi::sgemm_with_isa(isa, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, p.a.data(), p.a.ld,
                     p.b.data(), p.b.ld, c.beta, out.data(), p.c0.ld, threads);
  expect_matches(
      p, out,
      describe(c) + " isa=" + gi::kernel_set(isa).name + " threads=" + std::to_string(threads));
}

std::vector<gi::Isa> supported_isas() {
  std::vector<gi::Isa> isas;
  for (gi::Isa isa : {gi::Isa::generic, gi::Isa::avx2_fma, gi::Isa::avx512}) {
    if (gi::isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

// Runs `c` in all four transpose combinations with every supported ISA and 1 and 2 threads.
void check_all_paths(Case c, uint64_t seed) {
  for (int t = 0; t < 4; ++t) {
    c.trans_a = t & 1, c.trans_b = t & 2;
    const Problem p = make_problem(c, seed + t);
    for (gi::Isa isa : supported_isas()) {
      for (int threads : {1, 2}) run_isa(isa, p, threads);
    }
  }
}

TEST(GemmRef, HandComputedProducts) {
  // A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: A * B = [58 64; 139 154].
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<double> c = {1, 1, 1, 1};
  ref::gemm<double>(false, false, 2, 2, 3, 1.0, a.data(), 3, b.data(), 2, 0.0, c.data(), 2);
  EXPECT_EQ(c, (std::vector<double>{58, 64, 139, 154}));
  // Stored as [3, 2] and [2, 3], a and b read transposed give B^T * A^T = (A * B)^T; here with
  // alpha = 2 and beta = 1 on top of the previous result's transpose.
  std::vector<double> ct = {58, 139, 64, 154};
  ref::gemm<double>(true, true, 2, 2, 3, 2.0, b.data(), 2, a.data(), 3, 1.0, ct.data(), 2);
  EXPECT_EQ(ct, (std::vector<double>{174, 417, 192, 462}));
  // A^T * A with A stored [2, 3]: the [3, 3] Gram matrix, in float.
  std::vector<float> g(9, kNaN);
  const std::vector<float> af(a.begin(), a.end());
  ref::gemm<float>(true, false, 3, 3, 2, 1.0f, af.data(), 3, af.data(), 3, 0.0f, g.data(), 3);
  EXPECT_EQ(g, (std::vector<float>{17, 22, 27, 22, 29, 36, 27, 36, 45}));
  // B * A = [3, 2] x [2, 3]: K smaller than M and N.
  std::vector<double> o(9, 0.0);
  ref::gemm<double>(false, false, 3, 3, 2, 1.0, b.data(), 2, a.data(), 3, 0.0, o.data(), 3);
  EXPECT_EQ(o, (std::vector<double>{39, 54, 69, 49, 68, 87, 59, 82, 105}));
}

TEST(GemmRef, BetaZeroIgnoresNaNAndAlphaZeroIgnoresInputs) {
  const std::vector<float> a = {kNaN, 1}, b = {2, kNaN};
  std::vector<float> c = {kNaN};
  ref::gemm<float>(false, false, 1, 1, 2, 0.0f, a.data(), 2, b.data(), 1, 0.0f, c.data(), 1);
  EXPECT_EQ(c[0], 0.0f);
  c = {3.0f};
  ref::gemm<float>(false, false, 1, 1, 2, 0.0f, a.data(), 2, b.data(), 1, 2.0f, c.data(), 1);
  EXPECT_EQ(c[0], 6.0f);
}

TEST(GemmCpu, ReportsAnIsa) {
  const std::string isa = cpu::sgemm_isa();
  EXPECT_TRUE(isa == "avx512" || isa == "avx2-fma" || isa == "generic") << isa;
  EXPECT_EQ(isa, gi::kernel_set(gi::best_isa()).name);
  EXPECT_TRUE(gi::isa_supported(gi::Isa::generic));
}

TEST(GemmCpu, AwkwardSizes) {
  // (M, N, K) mixes of 1, 7, 13, 33, 67, 129, 257: no size is a multiple of any tile.
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 257, 33}, {257, 1, 33},  {7, 13, 1},
                               {13, 7, 67},  {33, 67, 13}, {67, 129, 33}, {129, 33, 257},
                               {257, 67, 7}, {1, 33, 129}, {33, 1, 257}};
  uint64_t seed = 1;
  for (const auto& s : shapes)
    check_all_paths({false, false, s[0], s[1], s[2], 0, 1.0f, 0.0f}, seed += 8);
}

TEST(GemmCpu, LeadingDimensionsWiderThanRows) {
  check_all_paths({false, false, 13, 67, 33, 3, 1.0f, 0.0f}, 100);
  check_all_paths({false, false, 67, 13, 129, 17, 1.0f, 0.0f}, 200);
}

TEST(GemmCpu, AlphaBeta) {
  // beta == 0 runs on NaN-poisoned C (make_problem); beta == 1 accumulates onto C.
  const float pairs[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}};
  uint64_t seed = 300;
  for (const auto& ab : pairs)
    check_all_paths({false, false, 33, 67, 13, 1, ab[0], ab[1]}, seed += 8);
}

TEST(GemmCpu, AlphaZeroScalesCWithoutReadingInputs) {
  for (gi::Isa isa : supported_isas()) {
    const std::vector<float> a(6, kNaN), b(6, kNaN);
    std::vector<float> c = {1, 2, 3, 4}, z = {kNaN, kNaN, kNaN, kNaN};
    gi::sgemm_with_isa(isa, false, false, 2, 2, 3, 0.0f, a.data(), 3, b.data(), 2, 2.0f, c.data(),
                       2, 2);
    EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8}));
    gi::sgemm_with_isa(isa, false, false, 2, 2, 3, 0.0f, a.data(), 3, b.data(), 2, 0.0f, z.data(),
                       2, 2);
    EXPECT_EQ(z, (std::vector<float>{0, 0, 0, 0}));
    // K == 0: an empty sum, so C = beta * C.
    std::vector<float> e = {1, 2};
    gi::sgemm_with_isa(isa, true, true, 1, 2, 0, 1.0f, a.data(), 1, b.data(), 1, 3.0f, e.data(), 2,
                       1);
    EXPECT_EQ(e, (std::vector<float>{3, 6}));
  }
}

TEST(GemmCpu, SeveralCacheBlocksInEveryDimension) {
  // K = 600 spans two KC slices (beta applies to the first only) and M = 230 several MC blocks
  // for every kernel set; M = 200, N = 4200 several wide NC panels; M = 3 takes the
  // single-A-block path through ten to twenty narrow B panels.
  check_all_paths({false, false, 230, 24, 600, 0, 0.75f, 0.5f}, 400);
  check_all_paths({false, false, 200, 4200, 3, 1, 1.0f, 0.0f}, 450);
  check_all_paths({false, false, 3, 4300, 300, 2, 1.0f, 1.0f}, 500);
}

TEST(GemmCpu, ThreadPlansSplitMNAndK) {
  // Shapes for which 2 threads split N (wide C), M (tall, narrow C) and K (tiny C, long K: 16
  // slices whose partial products are summed at the end), like the convolution and
  // inner-product GEMMs.
  check_all_paths({false, false, 20, 2000, 25, 0, 1.0f, 0.0f}, 600);
  check_all_paths({false, false, 600, 7, 40, 0, 1.0f, 1.0f}, 700);
  check_all_paths({false, false, 5, 9, 20000, 1, 1.0f, 0.5f}, 800);
  // More threads than the plan has parts, and than the machine has cores.
  const Problem p = make_problem({false, true, 67, 129, 33, 0, 1.0f, 0.0f}, 900);
  run_isa(gi::best_isa(), p, 3);
}

TEST(GemmCpu, ResultsDoNotDependOnThreadCount) {
  // Splitting M or N leaves every element's summation order alone, and K is sliced by the shape
  // only, so 1, 2 and 3 threads give bitwise the same C.
  const Case cases[] = {{false, true, 20, 25, 9000, 0, 1.0f, 0.5f},
                        {true, false, 67, 300, 129, 0, 1.0f, 0.0f}};
  for (const Case& c : cases) {
    const Problem p = make_problem(c, 1200);
    for (gi::Isa isa : supported_isas()) {
      std::vector<float> one = p.c0.values;
      gi::sgemm_with_isa(isa, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, p.a.data(), p.a.ld,
                         p.b.data(), p.b.ld, c.beta, one.data(), p.c0.ld, 1);
      for (int threads : {2, 3}) {
        std::vector<float> many = p.c0.values;
        gi::sgemm_with_isa(isa, c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, p.a.data(), p.a.ld,
                           p.b.data(), p.b.ld, c.beta, many.data(), p.c0.ld, threads);
        EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
            << describe(c) << " isa=" << gi::kernel_set(isa).name << " threads=" << threads;
      }
    }
  }
}

TEST(GemmCpu, CalledFromInsideAParallelRegion) {
  // Nested inside an OpenMP team, sgemm gets a team of one thread, which then runs every part of
  // the plan; two concurrent calls must not share any state.
  const Problem p0 = make_problem({false, false, 5, 9, 20000, 0, 1.0f, 0.0f}, 1000);
  const Problem p1 = make_problem({true, false, 20, 2000, 25, 0, 1.0f, 0.0f}, 1100);
  std::vector<float> out0 = p0.c0.values, out1 = p1.c0.values;
#pragma omp parallel num_threads(2)
  {
    const Problem& p = omp_get_thread_num() == 0 ? p0 : p1;
    std::vector<float>& out = omp_get_thread_num() == 0 ? out0 : out1;
    cpu::sgemm(p.c.trans_a, p.c.trans_b, p.c.M, p.c.N, p.c.K, p.c.alpha, p.a.data(), p.a.ld,
               p.b.data(), p.b.ld, p.c.beta, out.data(), p.c0.ld, 2);
  }
  expect_matches(p0, out0, "nested call 0");
  expect_matches(p1, out1, "nested call 1");
}

TEST(GemmCpu, TensorLevelComputesAndChecksShapes) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(5);
  // op(a) = a^T with a [3, 2], op(b) = b with b [3, 4]: c [2, 4].
  Tensor a = ctx.empty({3, 2}), b = ctx.empty({3, 4}), c = ctx.empty({2, 4});
  for (Tensor* t : {&a, &b}) {
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = float(rng.uniform(-1, 1));
  }
  c.fill(kNaN);
  gemm(ctx, true, false, 1.0f, a, b, 0.0f, c);
  std::vector<double> ad = to_double(a.to_vector()), bd = to_double(b.to_vector());
  std::vector<double> expected(8);
  ref::gemm<double>(true, false, 2, 4, 3, 1.0, ad.data(), 2, bd.data(), 4, 0.0, expected.data(), 4);
  const std::vector<float> got = c.to_vector();
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;

  // Empty operands: K = 0 makes C = beta * C = 0 here, and an empty C is left alone.
  Tensor a0 = ctx.empty({2, 0}), b0 = ctx.empty({0, 4}), c0 = ctx.empty({2, 0});
  gemm(ctx, false, false, 1.0f, a0, b0, 0.0f, c);
  EXPECT_EQ(c.to_vector(), std::vector<float>(8, 0.0f));
  gemm(ctx, false, true, 1.0f, a0, ctx.empty({0, 0}), 0.0f, c0);

  auto message_of = [&](bool ta, bool tb, const Tensor& x, const Tensor& y, Tensor& z) {
    try {
      gemm(ctx, ta, tb, 1.0f, x, y, 0.0f, z);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Without the transpose, a [3, 2] times b [3, 4] has mismatched K.
  std::string msg = message_of(false, false, a, b, c);
  EXPECT_NE(msg.find("a [3, 2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b [3, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("K extents differ"), std::string::npos) << msg;
  Tensor wrong_c = ctx.empty({4, 2});
  msg = message_of(true, false, a, b, wrong_c);
  EXPECT_NE(msg.find("c must be [2, 4]"), std::string::npos) << msg;
  Tensor flat = ctx.empty({6});
  msg = message_of(true, false, flat, b, c);
  EXPECT_NE(msg.find("a must be 2-D"), std::string::npos) << msg;
  Tensor f64({3, 4}, DType::f64);
  msg = message_of(true, false, a, f64, c);
  EXPECT_NE(msg.find("b is f64[3, 4] on cpu, expected f32[3, 4]"), std::string::npos) << msg;
}

// f64 tensors on the CPU run the double-precision reference itself.
TEST(GemmCpu, TensorLevelF64RunsTheReference) {
  Context ctx(Device::cpu());
  const std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {7, 8, 9, 10, 11, 12};
  Tensor a({2, 3}, DType::f64), b({3, 2}, DType::f64), c({2, 2}, DType::f64);
  std::copy(av.begin(), av.end(), a.data<double>());
  std::copy(bv.begin(), bv.end(), b.data<double>());
  for (int64_t i = 0; i < 4; ++i) c.data<double>()[i] = 1.0;
  gemm(ctx, false, false, 2.0f, a, b, 0.5f, c);
  std::vector<double> expected(4, 1.0);
  ref::gemm<double>(false, false, 2, 2, 3, 2.0, av.data(), 3, bv.data(), 2, 0.5, expected.data(),
                    2);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(c.data<double>()[i], expected[size_t(i)]) << i;
}

}  // namespace
}  // namespace crema::kernels
