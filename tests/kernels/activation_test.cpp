// Pointwise activations (ELU, sigmoid, tanh, clip, swish, GELU) and PReLU on the CPU: the
// references by hand, against PyTorch's golden values (tests/fixtures/activation_golden.txt) and
// against central differences; the fast CPU path against ref<double> with poisoned outputs, on
// one and two threads, in place; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/activations/pointwise.h"
#include "kernels/activations/prelu.h"
#include "tests/fixtures/activation_fixture.h"
#include "tests/kernels/activation_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::activation_test {
namespace {

using K = ActivationKind;

std::string label(const Activation& a) {
  return std::string(activation_name(a.kind)) + " alpha=" + std::to_string(a.alpha) +
         " beta=" + std::to_string(a.beta);
}

TEST(ActivationRef, ByHand) {
  const std::vector<double> x = {-1.0, 0.0, 0.5, 2.0}, ones(4, 1.0);
  std::vector<double> y, dx;
  reference({K::elu, 0.5f}, x, ones, y, dx);
  EXPECT_NEAR(y[0], 0.5 * (std::exp(-1.0) - 1.0), 1e-15);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(y[3], 2.0);
  EXPECT_NEAR(dx[0], 0.5 * std::exp(-1.0), 1e-15);
  EXPECT_EQ(dx[1], 0.5);  // at x = 0: alpha, PyTorch's value
  EXPECT_EQ(dx[2], 1.0);

  reference({K::sigmoid}, x, ones, y, dx);
  EXPECT_EQ(y[1], 0.5);
  EXPECT_NEAR(dx[3], std::exp(-2.0) / std::pow(1.0 + std::exp(-2.0), 2), 1e-15);

  reference({K::clip, 1.0f, 1.0f, 0.0f, 0.5f}, x, ones, y, dx);
  EXPECT_EQ(y, (std::vector<double>{0.0, 0.0, 0.5, 0.5}));
  EXPECT_EQ(dx, (std::vector<double>{0.0, 1.0, 1.0, 0.0}));  // ends included

  reference({K::swish, 1.0f, 2.0f}, x, ones, y, dx);
  EXPECT_NEAR(y[2], 0.5 / (1.0 + std::exp(-1.0)), 1e-15);

  reference({K::gelu_erf}, x, ones, y, dx);
  EXPECT_NEAR(y[3], 2.0 * 0.97724986805182079, 1e-15);  // 2 * Phi(2)
  EXPECT_NEAR(dx[1], 0.5, 1e-15);                       // Phi(0) + 0

  // Mish at 0: tanh(softplus(0)) = tanh(log 2) = (2 - 1/2) / (2 + 1/2) = 0.6, so y = 0 and
  // dy/dx = 0.6 + 0 * ... ; at 2: t = n / (n + 2) with n = e^2 (e^2 + 2).
  reference({K::mish}, x, ones, y, dx);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_NEAR(dx[1], 0.6, 1e-15);
  const double e2 = std::exp(2.0), n2 = e2 * (e2 + 2.0), t2 = n2 / (n2 + 2.0);
  EXPECT_NEAR(y[3], 2.0 * t2, 1e-15);
  EXPECT_NEAR(dx[3], t2 + 2.0 * e2 / (1.0 + e2) * (1.0 - t2 * t2), 1e-15);

  // Softsign: -1 -> -1/2 with slope 1/4; 0 -> 0 with slope 1; 2 -> 2/3 with slope 1/9.
  reference({K::softsign}, x, ones, y, dx);
  EXPECT_EQ(y[0], -0.5);
  EXPECT_EQ(dx[0], 0.25);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(dx[1], 1.0);
  EXPECT_NEAR(y[3], 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(dx[3], 1.0 / 9.0, 1e-15);
}

TEST(ActivationRef, BackwardMatchesCentralDifferences) {
  Random rng(5);
  const std::vector<float> xf = testing::random_values(rng, 200, -4, 4);
  for (const Activation& a : all_activations()) {
    SCOPED_TRACE(label(a));
    std::vector<double> x(xf.begin(), xf.end()), ones(x.size(), 1.0), y, dx;
    reference(a, x, ones, y, dx);
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) < 1e-3 || std::fabs(x[i] - a.min) < 1e-3 ||
          std::fabs(x[i] - a.max) < 1e-3) {
        continue;  // kinks of ELU and Clip
      }
      double plus, minus;
      const double xp = x[i] + h, xm = x[i] - h;
      ref::activation_forward(a, 1, &xp, &plus);
      ref::activation_forward(a, 1, &xm, &minus);
      EXPECT_NEAR(dx[i], (plus - minus) / (2 * h), 1e-7 * std::max(1.0, std::fabs(dx[i])))
          << "x = " << x[i];
    }
  }
}

// PyTorch's values, exactly (float64) for ref<double>, and within float32 rounding for the CPU.
TEST(ActivationRef, MatchesPyTorch) {
  const auto cases = crema::testing::read_activation_golden();
  ASSERT_EQ(cases.size(), 12u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.x.size(), 34u);
    std::vector<double> y, dx;
    reference(c.activation, kernels::testing::to_double(c.x), kernels::testing::to_double(c.dy), y,
              dx);
    for (size_t i = 0; i < c.x.size(); ++i) {
      EXPECT_NEAR(y[i], c.y[i], 1e-5 * std::fabs(c.y[i]) + 1e-12) << "x = " << c.x[i];
      EXPECT_NEAR(dx[i], c.dx[i], 1e-5 * std::fabs(c.dx[i]) + 1e-12) << "x = " << c.x[i];
    }
  }
}

TEST(ActivationCpu, MatchesPyTorch) {
  Context ctx(Device::cpu(), 1, 2);
  for (const auto& c : crema::testing::read_activation_golden()) {
    SCOPED_TRACE(c.name);
    const int64_t n = int64_t(c.x.size());
    const Tensor x = Tensor::from_vector({n}, c.x), dy = Tensor::from_vector({n}, c.dy);
    Tensor y = kernels::testing::poisoned({n}), dx = kernels::testing::poisoned({n});
    activation_forward(ctx, c.activation, x, y);
    const bool from_y = from_output(c.activation);
    activation_backward(ctx, c.activation, from_y ? y : x, dy, dx);
    const std::vector<float> yv = y.to_vector(), dxv = dx.to_vector();
    EXPECT_LT(kernels::testing::rel_error(yv, c.y), 1e-5);
    EXPECT_LT(kernels::testing::rel_error(dxv, c.dx), 1e-5);
    crema::testing::expect_activation_close(yv, c.y, 1e-5);
    crema::testing::expect_activation_close(dxv, c.dx, 1e-5);
  }
}

// Every element within 2e-6 (relative above 1, absolute below: expect_activation_close) and, on
// the large arrays, ||fast - ref|| / ||ref|| < 1e-6.
void expect_close_to_reference(const std::vector<float>& got, const std::vector<double>& want) {
  crema::testing::expect_activation_close(got, want, 2e-6);
  if (got.size() >= 1000) {
    EXPECT_LT(kernels::testing::rel_error(got, want), 1e-6);
  }
}

TEST(ActivationCpu, MatchesReference) {
  for (int64_t n : {1, 7, 4097, 40009}) {  // a partial chunk; the threaded path
    Random rng{uint64_t(n)};
    const Tensor x = kernels::testing::random_tensor(rng, {n}, -5, 5);
    const Tensor dy = kernels::testing::random_tensor(rng, {n});
    for (const Activation& a : all_activations()) {
      std::vector<double> y_ref, dx_ref;
      reference(a, kernels::testing::to_double(x), kernels::testing::to_double(dy), y_ref, dx_ref);
      for (int threads : {1, 2}) {
        SCOPED_TRACE(label(a) + " n=" + std::to_string(n) + " threads=" + std::to_string(threads));
        Context ctx(Device::cpu(), 1, threads);
        Tensor y = kernels::testing::poisoned({n}), dx = kernels::testing::poisoned({n});
        activation_forward(ctx, a, x, y);
        const bool from_y = from_output(a);
        activation_backward(ctx, a, from_y ? y : x, dy, dx);
        expect_close_to_reference(y.to_vector(), y_ref);
        expect_close_to_reference(dx.to_vector(), dx_ref);
      }
    }
  }
}

TEST(ActivationCpu, InPlace) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(3);
  const Tensor x = kernels::testing::random_tensor(rng, {3, 5001}, -3, 3);
  const Tensor dy = kernels::testing::random_tensor(rng, {3, 5001});
  for (const Activation& a : all_activations()) {
    SCOPED_TRACE(label(a));
    const bool from_y = from_output(a);
    Tensor y(x.shape()), dx(x.shape());
    activation_forward(ctx, a, x, y);
    activation_backward(ctx, a, from_y ? y : x, dy, dx);
    Tensor t = x.clone(), g = dy.clone();
    activation_forward(ctx, a, t, t);
    activation_backward(ctx, a, from_y ? t : x, g, g);
    EXPECT_EQ(t.to_vector(), y.to_vector());
    EXPECT_EQ(g.to_vector(), dx.to_vector());
  }
}

TEST(Activation, RejectsBadConstantsAndTensors) {
  Context ctx;
  Tensor x({2, 3}), y({2, 3}), wrong({3, 2});
  x.fill(0.5f);
  EXPECT_THROW(activation_forward(ctx, {K::elu, -0.5f}, x, y), Error);
  EXPECT_THROW(activation_forward(ctx, {K::clip, 1.0f, 1.0f, 2.0f, 1.0f}, x, y), Error);
  EXPECT_THROW(activation_forward(ctx, {K::swish, 1.0f, NAN}, x, y), Error);
  EXPECT_THROW(activation_forward(ctx, {K::tanh}, x, wrong), Error);
  EXPECT_THROW(activation_backward(ctx, {K::gelu_erf}, x, wrong, y), Error);
  try {
    activation_backward(ctx, {K::elu, -1.0f}, x, x, y);
    ADD_FAILURE() << "a negative alpha was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
}

// --- PReLU --------------------------------------------------------------------------------------

struct PreluCase {
  int64_t N, C, D;
};

TEST(PreluRef, ByHand) {
  // x [N=1, C=2, D=2], slopes 0.25 and -0.5.
  const std::vector<double> x = {-2, 3, -4, 0}, slope = {0.25, -0.5}, dy = {1, 2, 3, 4};
  std::vector<double> y(4), dx(4), dslope = {10, 20};
  ref::prelu_forward<double>(1, 2, 2, x.data(), slope.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{-0.5, 3, 2, 0}));
  ref::prelu_backward_data<double>(1, 2, 2, x.data(), slope.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<double>{0.25, 2, -1.5, -2}));  // x = 0 takes the slope
  ref::prelu_backward_slope<double>(1, 2, 2, x.data(), dy.data(), dslope.data());
  EXPECT_EQ(dslope, (std::vector<double>{10 - 2, 20 - 12}));  // accumulated
}

TEST(PreluCpu, MatchesReference) {
  // N = 1; D beyond one 4096-element block; D = 1 (after InnerProduct); C = 1 (a shared slope).
  const std::vector<PreluCase> cases = {
      {1, 3, 7}, {5, 4, 4099}, {64, 20, 1}, {1, 1, 100003}, {3, 1, 50}};
  for (int threads : {1, 2}) {
    Context ctx(Device::cpu(), 1, threads);
    for (const PreluCase& s : cases) {
      SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) +
                   " D=" + std::to_string(s.D) + " threads=" + std::to_string(threads));
      const int64_t n = s.N * s.C * s.D;
      Random rng{uint64_t(n + s.C)};
      const std::vector<float> x = kernels::testing::random_values(rng, n);
      const std::vector<float> dy = kernels::testing::random_values(rng, n);
      const std::vector<float> slope = kernels::testing::random_values(rng, s.C, -0.5, 0.5);
      const std::vector<float> dslope0 = kernels::testing::random_values(rng, s.C);
      std::vector<float> y(size_t(n), NAN), dx(size_t(n), NAN), dslope = dslope0;
      cpu::prelu_forward(s.N, s.C, s.D, x.data(), slope.data(), y.data(), threads);
      cpu::prelu_backward_data(s.N, s.C, s.D, x.data(), slope.data(), dy.data(), dx.data(),
                               threads);
      cpu::prelu_backward_slope(s.N, s.C, s.D, x.data(), dy.data(), dslope.data(), threads);

      const auto xd = kernels::testing::to_double(x), dyd = kernels::testing::to_double(dy);
      const auto sd = kernels::testing::to_double(slope);
      std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n)),
          dslope_ref = kernels::testing::to_double(dslope0);
      ref::prelu_forward(s.N, s.C, s.D, xd.data(), sd.data(), y_ref.data());
      ref::prelu_backward_data(s.N, s.C, s.D, xd.data(), sd.data(), dyd.data(), dx_ref.data());
      ref::prelu_backward_slope(s.N, s.C, s.D, xd.data(), dyd.data(), dslope_ref.data());
      EXPECT_LT(kernels::testing::rel_error(y, y_ref), 1e-7);
      EXPECT_LT(kernels::testing::rel_error(dx, dx_ref), 1e-7);
      EXPECT_LT(kernels::testing::rel_error(dslope, dslope_ref), 1e-6);
    }
  }
}

TEST(PreluCpu, SlopeGradientDoesNotDependOnTheThreadCount) {
  const int64_t N = 3, C = 2, D = 30001;
  Random rng(9);
  const std::vector<float> x = kernels::testing::random_values(rng, N * C * D);
  const std::vector<float> dy = kernels::testing::random_values(rng, N * C * D);
  std::vector<float> one = {0.5f, -0.25f}, two = one;
  cpu::prelu_backward_slope(N, C, D, x.data(), dy.data(), one.data(), 1);
  cpu::prelu_backward_slope(N, C, D, x.data(), dy.data(), two.data(), 2);
  EXPECT_EQ(one, two);
}

TEST(Prelu, TensorLevelSharedPerChannelAndInPlace) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(4);
  const Tensor x = kernels::testing::random_tensor(rng, {2, 3, 5});
  const Tensor dy = kernels::testing::random_tensor(rng, {2, 3, 5});
  for (const Shape& slope_shape : {Shape{3}, Shape{1}}) {
    const Tensor slope = kernels::testing::random_tensor(rng, slope_shape, 0.1, 0.4);
    const std::vector<float> sv = slope.to_vector(), xv = x.to_vector();
    Tensor y = kernels::testing::poisoned(x.shape()), dslope(slope_shape);
    dslope.fill(0.0f);
    prelu_forward(ctx, x, slope, y);
    const std::vector<float> yv = y.to_vector();
    for (size_t i = 0; i < xv.size(); ++i) {
      const float s = sv.size() == 1 ? sv[0] : sv[(i / 5) % 3];
      EXPECT_EQ(yv[i], xv[i] > 0 ? xv[i] : s * xv[i]);
    }
    Tensor dx(x.shape());
    prelu_backward_slope(ctx, x, dy, dslope);
    prelu_backward_data(ctx, x, slope, dy, dx);
    // In place: y over x (x kept aside by the caller), dx over dy, the slope gradient first.
    Tensor t = x.clone(), g = dy.clone(), dslope2(slope_shape);
    dslope2.fill(0.0f);
    prelu_forward(ctx, t, slope, t);
    EXPECT_EQ(t.to_vector(), yv);
    prelu_backward_slope(ctx, x, g, dslope2);
    prelu_backward_data(ctx, x, slope, g, g);
    EXPECT_EQ(g.to_vector(), dx.to_vector());
    EXPECT_EQ(dslope2.to_vector(), dslope.to_vector());
  }
}

TEST(Prelu, RejectsASlopeThatFitsNoAxis) {
  Context ctx;
  Tensor x({2, 3, 4}), y({2, 3, 4}), slope({4}), flat({6}), flat_slope({3});
  x.fill(1.0f);
  slope.fill(0.25f);
  flat_slope.fill(0.25f);
  try {
    prelu_forward(ctx, x, slope, y);
    ADD_FAILURE() << "4 slopes for 3 channels were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slope"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prelu_forward(ctx, flat, flat_slope, flat), Error);  // no channel axis
}

}  // namespace
}  // namespace crema::kernels::activation_test
