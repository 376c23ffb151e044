// Divisive / local contrast normalization on the CPU: ref<double> against hand-computed values
// and against finite differences (every backward, in double), the fast path against ref<double>
// on awkward shapes with every blend, thread-count independence, and the dispatch's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/lcn/lcn.h"
#include "tests/kernels/lcn_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using testing::rel_error;

TEST(LcnRef, DivisiveNormalizationByHand) {
  // x = [1, 2, 3] in one row, n = 3: window sums of x^2 are 5, 14, 13 (outside counts zero).
  const LcnShape s{1, 1, 1, 3};
  const LcnParams p{3, 1.0, 0.5, 1.0};
  const double x[] = {1, 2, 3};
  double y[3];
  ref::divnorm_forward<double>(s, p, 1.0, x, nullptr, 0.0, y);
  EXPECT_DOUBLE_EQ(y[0], 1 / std::sqrt(1 + 5.0 / 9));
  EXPECT_DOUBLE_EQ(y[1], 2 / std::sqrt(1 + 14.0 / 9));
  EXPECT_DOUBLE_EQ(y[2], 3 / std::sqrt(1 + 13.0 / 9));
}

TEST(LcnRef, LcnSubtractsTheBoxMean) {
  // alpha_n = 0 leaves d = k = 1: y = x - box(x), box(x) = window sums / 9 = [3, 6, 5] / 9.
  const LcnShape s{1, 1, 1, 3};
  const LcnParams p{3, 0.0, 0.75, 1.0};
  const double x[] = {1, 2, 3};
  double y[] = {1, 1, 1};
  ref::lcn_forward<double>(s, p, 2.0, x, 1.0, y);
  EXPECT_DOUBLE_EQ(y[0], 2 * (1 - 3.0 / 9) + 1);
  EXPECT_DOUBLE_EQ(y[1], 2 * (2 - 6.0 / 9) + 1);
  EXPECT_DOUBLE_EQ(y[2], 2 * (3 - 5.0 / 9) + 1);
}

// d(sum dy * f(v)) / dv by central differences, f writing into out.
std::vector<double> numeric_gradient(std::vector<double> v, const std::vector<double>& dy,
                                     const std::function<void(const double*, double*)>& f) {
  std::vector<double> grad(v.size()), out(dy.size());
  const double h = 1e-6;
  for (size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    double plus = 0, minus = 0;
    v[i] = saved + h;
    f(v.data(), out.data());
    for (size_t j = 0; j < out.size(); ++j) plus += dy[j] * out[j];
    v[i] = saved - h;
    f(v.data(), out.data());
    for (size_t j = 0; j < out.size(); ++j) minus += dy[j] * out[j];
    v[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  }
  return worst;
}

TEST(LcnRef, BackwardMatchesFiniteDifferences) {
  Random rng(11);
  for (const LcnParams& p : {LcnParams{3, 1.0, 0.5, 0.5}, LcnParams{5, 2.0, 0.75, 1.0}}) {
    const Shape shape{2, 2, 5, 4};
    const LcnShape s = testing::lcn_shape(shape);
    SCOPED_TRACE(testing::lcn_str(shape, p));
    const std::vector<double> x = testing::to_double(testing::random_values(rng, s.numel(), -2, 2));
    const std::vector<double> m = testing::to_double(testing::random_values(rng, s.numel()));
    const std::vector<double> dy = testing::to_double(testing::random_values(rng, s.numel()));
    std::vector<double> dx(x.size()), dm(x.size()), lcn_dx(x.size());
    ref::divnorm_backward<double>(s, p, 1.0, x.data(), m.data(), dy.data(), 0.0, dx.data(),
                                  dm.data());
    ref::lcn_backward<double>(s, p, 1.0, x.data(), dy.data(), 0.0, lcn_dx.data());
    EXPECT_LT(max_rel(dx, numeric_gradient(x, dy,
                                           [&](const double* v, double* y) {
                                             ref::divnorm_forward<double>(s, p, 1.0, v, m.data(),
                                                                          0.0, y);
                                           })),
              1e-7);
    EXPECT_LT(max_rel(dm, numeric_gradient(m, dy,
                                           [&](const double* v, double* y) {
                                             ref::divnorm_forward<double>(s, p, 1.0, x.data(), v,
                                                                          0.0, y);
                                           })),
              1e-7);
    EXPECT_LT(max_rel(lcn_dx, numeric_gradient(x, dy,
                                               [&](const double* v, double* y) {
                                                 ref::lcn_forward<double>(s, p, 1.0, v, 0.0, y);
                                               })),
              1e-7);
  }
}

TEST(LcnCpu, EveryPassMatchesReference) {
  Random rng(12);
  for (const auto& [shape, p] : testing::lcn_awkward_cases()) {
    for (const testing::LcnBlend& b : testing::kLcnBlends) {
      SCOPED_TRACE(testing::lcn_str(shape, p) + " blend " + std::to_string(b.alpha) + " " +
                   std::to_string(b.beta));
      const LcnShape s = testing::lcn_shape(shape);
      const Tensor x = testing::random_tensor(rng, shape, -2, 2);
      const Tensor m = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
      const Tensor prior =
          b.beta == 0 ? testing::poisoned(shape) : testing::random_tensor(rng, shape);
      const testing::LcnReference r = testing::lcn_reference(shape, p, b, x, m, dy, prior);
      const float alpha = float(b.alpha), beta = float(b.beta);
      std::vector<float> scratch(size_t(kLcnBackwardScratch * s.numel()));
      Tensor y = prior.clone(), dx = prior.clone(), dm = prior.clone(), ly = prior.clone(),
             ldx = prior.clone();
      cpu::divnorm_forward(s, p, alpha, x.data<float>(), m.data<float>(), beta, y.data<float>(), 2);
      cpu::divnorm_backward(s, p, alpha, x.data<float>(), m.data<float>(), dy.data<float>(), beta,
                            dx.data<float>(), dm.data<float>(), scratch.data(), 2);
      cpu::lcn_forward(s, p, alpha, x.data<float>(), beta, ly.data<float>(), scratch.data(), 2);
      cpu::lcn_backward(s, p, alpha, x.data<float>(), dy.data<float>(), beta, ldx.data<float>(),
                        scratch.data(), 2);
      EXPECT_LT(rel_error(y.to_vector(), r.divnorm_y), testing::kLcnTol);
      EXPECT_LT(rel_error(dx.to_vector(), r.divnorm_dx), testing::kLcnTol);
      EXPECT_LT(rel_error(dm.to_vector(), r.divnorm_dmeans), testing::kLcnTol);
      EXPECT_LT(rel_error(ly.to_vector(), r.lcn_y), testing::kLcnTol);
      EXPECT_LT(rel_error(ldx.to_vector(), r.lcn_dx), testing::kLcnTol);
    }
  }
}

TEST(LcnCpu, DoesNotDependOnThreadCount) {
  Random rng(13);
  const Shape shape{2, 3, 11, 9};
  const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
  const LcnParams p{5, 1.0, 0.5, 0.5};
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    Context ctx(Device::cpu(), 1, threads);
    Tensor dx = testing::poisoned(shape);
    lcn_backward(ctx, p, 1.0, x, dy, 0.0, dx);
    if (first.empty()) first = dx.to_vector();
    EXPECT_EQ(std::memcmp(first.data(), dx.to_vector().data(), first.size() * sizeof(float)), 0);
  }
}

TEST(Lcn, TensorLevelF64RunsTheReference) {
  Context ctx;
  Random rng(14);
  const Shape shape{1, 2, 3, 4};
  const Tensor x = testing::random_tensor(rng, shape);
  const std::vector<double> xd = testing::to_double(x);
  Tensor x64(shape, DType::f64), y64(shape, DType::f64), y32(shape);
  std::memcpy(x64.data<double>(), xd.data(), xd.size() * sizeof(double));
  const LcnParams p{3, 1.0, 0.5, 1.0};
  lcn_forward(ctx, p, 1.0, x64, 0.0, y64);
  lcn_forward(ctx, p, 1.0, x, 0.0, y32);
  std::vector<double> want(xd.size());
  ref::lcn_forward<double>(testing::lcn_shape(shape), p, 1.0, xd.data(), 0.0, want.data());
  EXPECT_EQ(std::memcmp(y64.data<double>(), want.data(), want.size() * sizeof(double)), 0);
  EXPECT_LT(rel_error(y32.to_vector(), want), testing::kLcnTol);
}

TEST(Lcn, ErrorsNameTheProblem) {
  Context ctx;
  Tensor x({1, 2, 3, 4}), y({1, 2, 3, 4}), flat({2, 3}), none;
  EXPECT_CONTAINS(error_of([&] {
                    lcn_forward(ctx, {4, 1.0, 0.5, 1.0}, 1, x, 0, y);
                  }),
                  "lcn_forward: local_size 4 must be odd and positive");
  EXPECT_CONTAINS(error_of([&] {
                    lcn_forward(ctx, {3, 1.0, 0.5, 0.0}, 1, x, 0, y);
                  }),
                  "lcn_forward: k 0.000000 must be positive");
  EXPECT_CONTAINS(error_of([&] { lcn_forward(ctx, {}, 1, flat, 0, y); }),
                  "lcn_forward: x is f32[2, 3] on cpu, expected 4 axes [N, C, H, W]");
  EXPECT_CONTAINS(error_of([&] { divnorm_forward(ctx, {}, 1, x, none, 0, x); }),
                  "divnorm_forward: y shares storage with x");
  EXPECT_CONTAINS(error_of([&] { divnorm_backward(ctx, {}, 1, x, flat, y, 0, y, none); }),
                  "divnorm_backward: means is f32[2, 3]");
}

}  // namespace
}  // namespace crema::kernels
