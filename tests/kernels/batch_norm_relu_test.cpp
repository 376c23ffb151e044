// The fused batch norm + ReLU (+ residual) on the CPU: the same bits as the unfused chain in every
// case of batch_norm_relu_cases() and of their nhwc forms, whatever the thread count; nhwc within
// float rounding of nchw; the reference (float64) against a plain evaluation of the formulas;
// errors.
#include "kernels/batch_norm/batch_norm_relu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/kernels/batch_norm_relu_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::testing {
namespace {

TEST(BatchNormReluCpu, SameBitsAsTheUnfusedChain) {
  std::vector<BatchNormReluCase> cases = batch_norm_relu_cases();
  for (const BatchNormReluCase& k : batch_norm_relu_nhwc_cases()) cases.push_back(k);
  for (const BatchNormReluCase& k : cases) {
    SCOPED_TRACE(k.name());
    Context ctx;
    const Outputs fused = run_batch_norm_relu(k, true, ctx, 11);
    const Outputs chain = run_batch_norm_relu(k, false, ctx, 11);
    ASSERT_EQ(fused.size(), chain.size());
    for (const auto& [name, values] : chain) EXPECT_EQ(fused.at(name), values) << name;
  }
}

std::vector<float> floats(const std::vector<uint32_t>& b) {
  std::vector<float> v(b.size());
  std::memcpy(v.data(), b.data(), b.size() * sizeof(float));
  return v;
}

// nhwc normalizes [N*H*W, C] rows (the channels walked as columns, sums in another order): every
// output within 1e-6 relative of the nchw run's (float rounding of double sums; statistics 1e-7).
TEST(BatchNormReluCpu, NhwcMatchesNchw) {
  for (BatchNormReluCase k : batch_norm_relu_nhwc_cases()) {
    SCOPED_TRACE(k.name());
    Context ctx;
    for (bool fused : {true, false}) {
      const Outputs nhwc = run_batch_norm_relu(k, fused, ctx, 13);
      k.layout = Layout::nchw;
      const Outputs nchw = run_batch_norm_relu(k, fused, ctx, 13);
      k.layout = Layout::nhwc;
      ASSERT_EQ(nhwc.size(), nchw.size());
      for (const auto& [name, values] : nchw) {
        EXPECT_LE(kernels::testing::rel_error(floats(nhwc.at(name)),
                                              kernels::testing::to_double(floats(values))),
                  1e-6)
            << name;
      }
    }
  }
}

TEST(BatchNormReluCpu, SameBitsForAnyThreadCount) {
  BatchNormReluCase k{{4, 6, 33, 35}};
  Context one(Device::cpu(), 1, 1), two(Device::cpu(), 1, 2);
  EXPECT_EQ(run_batch_norm_relu(k, true, one, 5), run_batch_norm_relu(k, true, two, 5));
  k.layout = Layout::nhwc;
  EXPECT_EQ(run_batch_norm_relu(k, true, one, 5), run_batch_norm_relu(k, true, two, 5));
}

// The float64 reference, element by element against the formulas written out here.
TEST(BatchNormReluRef, MatchesTheFormulas) {
  const kernels::BatchNormShape s{2, 3, 5};
  const int64_t count = s.N * s.C * s.S;
  const std::vector<float> xf = random_values(size_t(count), -2.0f, 2.0f, 1);
  const std::vector<float> rf = random_values(size_t(count), -1.0f, 1.0f, 2);
  const std::vector<float> dyf = random_values(size_t(count), -1.0f, 1.0f, 3);
  const std::vector<double> x(xf.begin(), xf.end()), r(rf.begin(), rf.end()),
      dy(dyf.begin(), dyf.end()), gamma{0.5, -1.25, 2.0}, beta{0.1, 0.0, -0.3};
  std::vector<double> y(static_cast<size_t>(count)), mean(3), invstd(3),
      dx(static_cast<size_t>(count)), dr(static_cast<size_t>(count));
  std::vector<double> dgamma(3, 0.0), dbeta(3, 0.0);
  kernels::ref::batch_norm_relu_forward_training<double>(
      s, x.data(), r.data(), gamma.data(), beta.data(), 1e-5, 0.1, y.data(), nullptr, mean.data(),
      invstd.data(), nullptr, nullptr, nullptr);
  kernels::ref::batch_norm_relu_backward<double>(s, x.data(), y.data(), dy.data(), gamma.data(),
                                                 beta.data(), mean.data(), invstd.data(), true,
                                                 dx.data(), dr.data(), dgamma.data(), dbeta.data());
  const double M = double(s.N * s.S);
  for (int64_t c = 0; c < s.C; ++c) {
    auto at = [&](int64_t n, int64_t i) { return size_t((n * s.C + c) * s.S + i); };
    double m = 0.0, v = 0.0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) m += x[at(n, i)] / M;
    }
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) v += std::pow(x[at(n, i)] - m, 2) / M;
    }
    const double is = 1.0 / std::sqrt(v + 1e-5);
    double sum_dv = 0.0, sum_dv_xhat = 0.0;
    std::vector<double> dv(size_t(count), 0.0);
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const size_t j = at(n, i);
        const double pre = gamma[c] * (x[j] - m) * is + beta[c] + r[j];
        EXPECT_NEAR(y[j], std::max(pre, 0.0), 1e-12);
        dv[j] = pre > 0.0 ? dy[j] : 0.0;
        EXPECT_EQ(dr[j], dv[j]);
        sum_dv += dv[j];
        sum_dv_xhat += dv[j] * (x[j] - m) * is;
      }
    }
    EXPECT_NEAR(dbeta[c], sum_dv, 1e-12);
    EXPECT_NEAR(dgamma[c], sum_dv_xhat, 1e-12);
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t i = 0; i < s.S; ++i) {
        const size_t j = at(n, i);
        const double want =
            gamma[c] * is * (dv[j] - sum_dv / M - (x[j] - m) * is * sum_dv_xhat / M);
        EXPECT_NEAR(dx[j], want, 1e-12);
      }
    }
  }
}

TEST(BatchNormReluCpu, Errors) {
  Context ctx;
  Tensor x = ctx.zeros({2, 3, 4}), r = ctx.zeros({2, 3, 5}), y = ctx.zeros({2, 3, 4});
  Tensor stats = ctx.zeros({3}), none;
  EXPECT_CONTAINS(error_of([&] {
                    kernels::batch_norm_relu_forward_training(ctx, x, r, none, none, 1e-5f, 0.1f, y,
                                                              none, stats, stats, none, none, none);
                  }),
                  "batch_norm_relu_forward_training");
  Tensor dr = ctx.zeros({2, 3, 4});
  EXPECT_CONTAINS(error_of([&] {
                    kernels::batch_norm_relu_backward(ctx, x, none, y, none, none, stats, stats,
                                                      true, y, dr, none, none);
                  }),
                  "dr is given but y is not");
}

}  // namespace
}  // namespace crema::testing
