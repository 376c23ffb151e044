// Dropout on the CPU: the kept fraction, kept units scaled and the others zero, masks fixed by
// (seed, step) and different across steps and seeds, the backward applying the forward's mask, a
// finite-difference check at a fixed mask, the step counter, bit-for-bit agreement of the fast
// path with the reference, and the dispatch's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/dropout/dropout.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

// Values away from zero, so that a kept unit is never mistaken for a dropped one.
std::vector<float> nonzero_values(int64_t n, uint64_t seed) {
  Random rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(rng.uniform(0.5, 1.5)) * (rng.below(2) ? 1.0f : -1.0f);
  return v;
}

std::vector<bool> mask_of(const std::vector<float>& y) {
  std::vector<bool> m(y.size());
  for (size_t i = 0; i < y.size(); ++i) m[i] = y[i] != 0.0f;
  return m;
}

TEST(Dropout, KeepsAboutOneMinusTheRatio) {
  const int64_t n = 1 << 20;
  const std::vector<float> x(size_t(n), 1.0f);
  std::vector<float> y(x.size());
  for (const float ratio : {0.1f, 0.5f, 0.9f}) {
    cpu::dropout_forward(n, x.data(), y.data(), ratio, 42, 1, 2);
    int64_t kept = 0;
    for (float v : y) kept += v != 0.0f;
    // The standard deviation of the fraction is sqrt(p (1 - p) / n) < 5e-4: 5 sigma is 2.5e-3.
    EXPECT_NEAR(double(kept) / double(n), 1.0 - ratio, 2.5e-3) << "ratio " << ratio;
  }
}

TEST(Dropout, KeptUnitsAreScaledAndTheOthersZero) {
  const int64_t n = 1001;
  const std::vector<float> x = nonzero_values(n, 1);
  std::vector<float> y(x.size(), testing::kNaN);
  const float ratio = 0.3f, scale = dropout_scale(ratio);
  cpu::dropout_forward(n, x.data(), y.data(), ratio, 7, 3, 1);
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(y[i] == 0.0f || y[i] == x[i] * scale) << i << ": " << x[i] << " -> " << y[i];
    kept += y[i] != 0.0f;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
}

TEST(Dropout, RatioZeroIsTheIdentity) {
  const std::vector<float> x = nonzero_values(517, 2);
  std::vector<float> y(x.size());
  cpu::dropout_forward(int64_t(x.size()), x.data(), y.data(), 0.0f, 11, 1, 1);
  EXPECT_EQ(y, x);
}

TEST(Dropout, MasksAreFixedBySeedAndStep) {
  const int64_t n = 4096;
  const std::vector<float> x = nonzero_values(n, 3);
  auto mask = [&](uint64_t seed, uint64_t step) {
    std::vector<float> y(x.size());
    cpu::dropout_forward(n, x.data(), y.data(), 0.5f, seed, step, 1);
    return mask_of(y);
  };
  EXPECT_EQ(mask(5, 1), mask(5, 1));
  EXPECT_NE(mask(5, 1), mask(5, 2));
  EXPECT_NE(mask(5, 1), mask(6, 1));
  EXPECT_NE(mask(5, 1), mask(5, 1 + (uint64_t(1) << 32)));  // every bit of the step counts
  // Neighbouring steps are not correlated: they agree on about half the units.
  const std::vector<bool> a = mask(5, 1), b = mask(5, 2);
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_NEAR(double(same) / double(n), 0.5, 0.05);
}

TEST(Dropout, CpuMatchesReferenceBitForBit) {
  for (const int64_t n : {int64_t(1), int64_t(37), int64_t(100003)}) {
    const std::vector<float> x = nonzero_values(n, 4);
    std::vector<float> want(x.size()), got(x.size());
    ref::dropout_forward(n, x.data(), want.data(), 0.4f, 9, 12);
    for (const int threads : {1, 2}) {
      cpu::dropout_forward(n, x.data(), got.data(), 0.4f, 9, 12, threads);
      EXPECT_EQ(got, want) << n << " elements, " << threads << " thread(s)";
      cpu::dropout_backward(n, x.data(), got.data(), 0.4f, 9, 12, threads);
      EXPECT_EQ(got, want) << n << " elements, " << threads << " thread(s), backward";
    }
  }
}

// y = x * m is linear for a fixed mask m, so its gradient is m * dy; the finite differences of
// the reference forward at one (seed, step) must agree with the reference backward there.
TEST(Dropout, BackwardMatchesFiniteDifferencesAtAFixedMask) {
  const int64_t n = 64;
  const std::vector<float> xf = nonzero_values(n, 5), cf = nonzero_values(n, 6);
  const std::vector<double> x = testing::to_double(xf), c = testing::to_double(cf);
  const float ratio = 0.35f;
  auto objective = [&](const std::vector<double>& in) {
    std::vector<double> y(in.size());
    ref::dropout_forward(n, in.data(), y.data(), ratio, 21, 8);
    double sum = 0.0;
    for (size_t i = 0; i < y.size(); ++i) sum += c[i] * y[i];
    return sum;
  };
  std::vector<double> dx(x.size());
  ref::dropout_backward(n, c.data(), dx.data(), ratio, 21, 8);
  const double h = 1e-3;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    EXPECT_NEAR(dx[i], (objective(plus) - objective(minus)) / (2 * h), 1e-9) << i;
  }
}

TEST(Dropout, ForwardAdvancesTheStepAndBackwardReusesItsMask) {
  Context ctx;
  const Shape shape{7, 33};
  const std::vector<float> xv = nonzero_values(shape_numel(shape), 7);
  const Tensor x = Tensor::from_vector(shape, xv);
  Tensor step = dropout_step_counter(ctx);
  EXPECT_EQ(dropout_step_value(step), 0u);
  Tensor y(shape), dx(shape);
  std::vector<std::vector<bool>> masks;
  for (uint64_t pass = 1; pass <= 3; ++pass) {
    dropout_forward(ctx, x, y, 0.5f, 99, step);
    EXPECT_EQ(dropout_step_value(step), pass);
    // The forward used the advanced step.
    std::vector<float> want(xv.size());
    ref::dropout_forward(int64_t(xv.size()), xv.data(), want.data(), 0.5f, 99, pass);
    EXPECT_EQ(y.to_vector(), want);
    // The backward applies the same mask and factor to the gradient (here dy = x).
    dropout_backward(ctx, x, dx, 0.5f, 99, step);
    EXPECT_EQ(dx.to_vector(), want);
    EXPECT_EQ(dropout_step_value(step), pass);
    masks.push_back(mask_of(want));
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
}

TEST(Dropout, InPlace) {
  Context ctx;
  const Shape shape{5, 9};
  const std::vector<float> xv = nonzero_values(45, 8);
  Tensor xy = Tensor::from_vector(shape, xv), step = dropout_step_counter(ctx);
  dropout_forward(ctx, xy, xy, 0.25f, 3, step);
  std::vector<float> want(xv.size());
  ref::dropout_forward(45, xv.data(), want.data(), 0.25f, 3, 1);
  EXPECT_EQ(xy.to_vector(), want);
}

TEST(Dropout, BadArgumentsAreErrors) {
  Context ctx;
  Tensor x(Shape{4}), y(Shape{4}), step = dropout_step_counter(ctx), bad_step(Shape{1});
  x.fill(1.0f);
  auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const float ratio : {1.0f, -0.1f, 1.5f, NAN}) {
    EXPECT_NE(error_of([&] { dropout_forward(ctx, x, y, ratio, 1, step); }).find("ratio"),
              std::string::npos)
        << ratio;
  }
  EXPECT_NE(error_of([&] { dropout_forward(ctx, x, y, 0.5f, 1, bad_step); }).find("step"),
            std::string::npos);
  Tensor wrong(Shape{5});
  EXPECT_NE(error_of([&] { dropout_backward(ctx, x, wrong, 0.5f, 1, step); }).find("dx"),
            std::string::npos);
}

}  // namespace
}  // namespace crema::kernels
