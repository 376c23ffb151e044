// NHWC convolution, host side: the reference (ref::*_nhwc, the oracle of the CUDA NHWC tests)
// against a direct loop over the NHWC definition written here, the backward passes through the
// adjoint identities, and v9's entry in the version table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/random.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels {
namespace {

std::vector<double> random_values(Random& rng, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = rng.uniform(-1.0, 1.0);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// y[n,p,q,k] = bias[k] + sum w[k,r,s,c] x[n, i, j, g*Cg + c], indices written out in NHWC.
std::vector<double> direct_forward(const Conv2dGeometry& g, const std::vector<double>& x,
                                   const std::vector<double>& w, const std::vector<double>& bias) {
  const int64_t P = g.P(), Q = g.Q(), Cg = g.C / g.groups, Kg = g.K / g.groups;
  std::vector<double> y(size_t(g.N * P * Q * g.K));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < g.K; ++k) {
          double sum = bias[size_t(k)];
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s)
              for (int64_t c = 0; c < Cg; ++c) {
                const int64_t i = p * g.stride_h - g.pad_h + r * g.dilation_h;
                const int64_t j = q * g.stride_w - g.pad_w + s * g.dilation_w;
                if (i < 0 || i >= g.H || j < 0 || j >= g.W) continue;
                sum += w[size_t(((k * g.R + r) * g.S + s) * Cg + c)] *
                       x[size_t(((n * g.H + i) * g.W + j) * g.C + k / Kg * Cg + c)];
              }
          y[size_t(((n * P + p) * Q + q) * g.K + k)] = sum;
        }
  return y;
}

TEST(ConvolutionNhwc, ReferenceMatchesTheNhwcDefinitionAndItsAdjoints) {
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H  W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {2, 3, 7, 6, 5, 3, 2, 1, 0},
      {1, 6, 9, 8, 4, 3, 3, 2, 1, 2, 1, 2, 1, 2},
      {3, 4, 5, 7, 6, 1, 3, 0, 2, 1, 2, 1, 2},
  };
  Random rng(3);
  for (const Conv2dGeometry& g : geometries) {
    const int64_t P = g.P(), Q = g.Q(), Cg = g.C / g.groups;
    const std::vector<double> x = random_values(rng, g.N * g.H * g.W * g.C);
    const std::vector<double> w = random_values(rng, g.K * g.R * g.S * Cg);
    const std::vector<double> bias = random_values(rng, g.K);
    const std::vector<double> dy = random_values(rng, g.N * P * Q * g.K);
    const std::vector<double> dw0 = random_values(rng, int64_t(w.size()));
    std::vector<double> y(dy.size()), y_no_bias(dy.size()), dx(x.size()), dw = dw0;
    ref::conv2d_forward_nhwc<double>(g, x.data(), w.data(), bias.data(), y.data());
    ref::conv2d_forward_nhwc<double>(g, x.data(), w.data(), nullptr, y_no_bias.data());
    ref::conv2d_backward_data_nhwc<double>(g, dy.data(), w.data(), dx.data());
    ref::conv2d_backward_filter_nhwc<double>(g, x.data(), dy.data(), dw.data());
    const std::vector<double> expected = direct_forward(g, x, w, bias);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-12) << i;
    // <conv(x, w), dy> = <x, dx> (data is the adjoint in x) = <w, dw - dw0> (and in w).
    std::vector<double> gradient(dw.size());
    for (size_t i = 0; i < dw.size(); ++i) gradient[i] = dw[i] - dw0[i];
    const double forward = dot(y_no_bias, dy);
    EXPECT_NEAR(dot(x, dx), forward, 1e-10 * (1 + std::abs(forward)));
    EXPECT_NEAR(dot(w, gradient), forward, 1e-10 * (1 + std::abs(forward)));
  }
}

TEST(ConvolutionNhwc, RegistryKnowsTheNhwcAlgorithm) {
  if (conv_algorithms().empty()) GTEST_SKIP() << "a build without CUDA has no records";
  const ConvAlgorithm* v = conv_algorithm_named("nhwc_implicit_gemm");
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v->name, "nhwc_implicit_gemm");
  const std::vector<const ConvAlgorithm*>& all = conv_algorithms();
  EXPECT_NE(std::find(all.begin(), all.end(), v), all.end());
  const Conv2dGeometry odd{1, 3, 5, 7, 2, 3, 3, 2, 2, 2, 1, 2, 1};
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
    EXPECT_TRUE(v->supports(pass, odd));
    for (cuda::GemmMath math : {cuda::GemmMath::fp32, cuda::GemmMath::tf32, cuda::GemmMath::bf16}) {
      EXPECT_TRUE(v->computes_in(pass, math));
    }
  }
}

}  // namespace
}  // namespace crema::kernels
