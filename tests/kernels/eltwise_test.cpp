// Eltwise on the CPU: the reference by hand (ties, NaN, zeros in a product), the fast path
// against the reference bit for bit and against ref<double>, the product's backward against
// central differences, and the Tensor-level errors.
#include "kernels/elementwise/eltwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

using testing::kNaN;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Eltwise, ReferenceByHand) {
  const std::vector<float> a = {1, -2, 3, 0}, b = {4, 5, 3, kNaN}, c = {0.5f, 2, -1, 1};
  const float* x[] = {a.data(), b.data(), c.data()};
  const float coeff[] = {1, -1, 2};
  std::vector<float> y(4), arg(4);
  ref::eltwise_sum<float>(3, 3, x, coeff, y.data());
  EXPECT_EQ(y[0], 1 - 4 + 1.0f);
  EXPECT_EQ(y[1], -2 - 5 + 4.0f);
  EXPECT_EQ(y[2], 3 - 3 - 2.0f);
  ref::eltwise_prod<float>(3, 3, x, y.data());
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], -20.0f);
  ref::eltwise_max<float>(4, 3, x, y.data(), arg.data());
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(arg[0], 1.0f);
  EXPECT_EQ(y[1], 5.0f);
  EXPECT_EQ(arg[1], 1.0f);
  EXPECT_EQ(y[2], 3.0f);  // a tie between inputs 0 and 1: the first wins
  EXPECT_EQ(arg[2], 0.0f);
  EXPECT_TRUE(std::isnan(y[3]));  // a NaN wins
  EXPECT_EQ(arg[3], 1.0f);
  // d(a*b*c)/db at element 0 with a zero elsewhere is still exact: dy * a * c.
  const std::vector<float> dy = {1, 1, 1, 1};
  std::vector<float> dx(4);
  ref::eltwise_prod_backward<float>(3, 3, x, 1, dy.data(), dx.data());
  EXPECT_EQ(dx[0], 0.5f);
  EXPECT_EQ(dx[1], -4.0f);
  ref::eltwise_max_backward<float>(4, 0, dy.data(), arg.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 1, 0}));
}

TEST(Eltwise, ProdBackwardMatchesCentralDifferences) {
  Random rng(1);
  const int K = 4;
  const int64_t n = 5;
  std::vector<std::vector<double>> xs;
  for (int j = 0; j < K; ++j) {
    const std::vector<float> v = testing::random_values(rng, n, -2, 2);
    xs.emplace_back(v.begin(), v.end());
  }
  std::vector<const double*> x;
  for (auto& v : xs) x.push_back(v.data());
  const std::vector<double> dy = {0.3, -1.2, 0.7, 2.0, -0.4};
  for (int i = 0; i < K; ++i) {
    std::vector<double> dx(n), plus(n), minus(n);
    ref::eltwise_prod_backward(n, K, x.data(), i, dy.data(), dx.data());
    const double h = 1e-6;
    for (int64_t e = 0; e < n; ++e) {
      const double saved = xs[size_t(i)][size_t(e)];
      xs[size_t(i)][size_t(e)] = saved + h;
      ref::eltwise_prod(n, K, x.data(), plus.data());
      xs[size_t(i)][size_t(e)] = saved - h;
      ref::eltwise_prod(n, K, x.data(), minus.data());
      xs[size_t(i)][size_t(e)] = saved;
      EXPECT_NEAR(dx[size_t(e)], dy[size_t(e)] * (plus[size_t(e)] - minus[size_t(e)]) / (2 * h),
                  1e-6);
    }
  }
}

TEST(Eltwise, CpuMatchesReference) {
  for (int K : {1, 2, 3, 9}) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(2049), int64_t(70001)}) {
      SCOPED_TRACE("K " + std::to_string(K) + " n " + std::to_string(n));
      Random rng(uint64_t(K * 1000 + n));
      std::vector<std::vector<float>> xs;
      std::vector<const float*> x;
      std::vector<std::vector<double>> xds;
      std::vector<const double*> xd;
      for (int j = 0; j < K; ++j) xs.push_back(testing::random_values(rng, n, -1.5, 1.5));
      for (int j = 0; j < K; ++j) {
        x.push_back(xs[size_t(j)].data());
        xds.emplace_back(xs[size_t(j)].begin(), xs[size_t(j)].end());
      }
      for (int j = 0; j < K; ++j) xd.push_back(xds[size_t(j)].data());
      if (n > 1 && K > 1) xs[1][0] = xs[0][0];  // a tie for max
      if (n > 1 && K > 1) xds[1][0] = xds[0][0];
      std::vector<float> coeff(static_cast<size_t>(K)), dy = testing::random_values(rng, n);
      for (int j = 0; j < K; ++j) coeff[size_t(j)] = float(j % 3) - 0.75f;
      const std::vector<double> coeff_d(coeff.begin(), coeff.end()), dyd(dy.begin(), dy.end());
      const size_t un = size_t(n);
      std::vector<float> want(un), want_arg(un), got(un, kNaN), got_arg(un, kNaN);
      std::vector<double> want_d(un), arg_d(un);

      ref::eltwise_sum(n, K, x.data(), coeff.data(), want.data());
      ref::eltwise_sum(n, K, xd.data(), coeff_d.data(), want_d.data());
      cpu::eltwise_sum(n, K, x.data(), coeff.data(), got.data(), 2);
      EXPECT_TRUE(same_bits(got, want));
      EXPECT_LT(testing::rel_error(got, want_d), 1e-6);

      ref::eltwise_prod(n, K, x.data(), want.data());
      ref::eltwise_prod(n, K, xd.data(), want_d.data());
      std::fill(got.begin(), got.end(), kNaN);
      cpu::eltwise_prod(n, K, x.data(), got.data(), 2);
      EXPECT_TRUE(same_bits(got, want));
      EXPECT_LT(testing::rel_error(got, want_d), 1e-6);

      const int i = K - 1;
      ref::eltwise_prod_backward(n, K, x.data(), i, dy.data(), want.data());
      ref::eltwise_prod_backward(n, K, xd.data(), i, dyd.data(), want_d.data());
      std::fill(got.begin(), got.end(), kNaN);
      cpu::eltwise_prod_backward(n, K, x.data(), i, dy.data(), got.data(), 2);
      EXPECT_TRUE(same_bits(got, want));
      EXPECT_LT(testing::rel_error(got, want_d), 1e-6);

      ref::eltwise_max(n, K, xd.data(), want_d.data(), arg_d.data());
      ref::eltwise_max(n, K, x.data(), want.data(), want_arg.data());
      std::fill(got.begin(), got.end(), kNaN);
      cpu::eltwise_max(n, K, x.data(), got.data(), got_arg.data(), 2);
      EXPECT_EQ(testing::rel_error(got, want_d), 0.0);
      EXPECT_EQ(testing::rel_error(got_arg, arg_d), 0.0);

      ref::eltwise_max_backward(n, i, dy.data(), want_arg.data(), want.data());
      std::fill(got.begin(), got.end(), kNaN);
      cpu::eltwise_max_backward(n, i, dy.data(), got_arg.data(), got.data(), 2);
      EXPECT_TRUE(same_bits(got, want));
    }
  }
}

TEST(Eltwise, Errors) {
  Context ctx;
  Tensor a({2, 3}), b({3, 2}), y({2, 3}), arg({2, 3});
  a.fill(1.0f);
  b.fill(1.0f);
  try {
    eltwise_sum(ctx, {&a, &b}, {1.0f, 1.0f}, y);
    ADD_FAILURE() << "different shapes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x[1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eltwise_sum(ctx, {&a, &a}, {1.0f}, y), Error);  // one coefficient per input
  EXPECT_THROW(eltwise_prod(ctx, {}, y), Error);
  EXPECT_THROW(eltwise_max(ctx, {&a, &b}, y, arg), Error);
  EXPECT_THROW(eltwise_prod_backward(ctx, {&a, &a}, 2, y, arg), Error);  // no input 2
}

}  // namespace
}  // namespace crema::kernels
