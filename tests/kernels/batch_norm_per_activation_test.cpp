// Per-activation batch norm on the CPU (f32 and f64): the forwards and the backward against a
// plain double oracle written from cuDNN's definition (statistics per element of [C, H, W] over N,
// independently of the channel batch norm the implementation reuses), and the shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using testing::rel_error;

// The oracle: x [N, A] (A activations), every activation on its own.
struct Oracle {
  std::vector<double> y, mean, invstd, running_mean, running_var, dx, dgamma, dbeta;
};
Oracle oracle(int64_t N, int64_t A, const std::vector<double>& x, const std::vector<double>& gamma,
              const std::vector<double>& beta, const std::vector<double>& dy, double eps,
              double momentum) {
  Oracle o;
  for (int64_t a = 0; a < A; ++a) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < N; ++n) mean += x[size_t(n * A + a)] / double(N);
    for (int64_t n = 0; n < N; ++n) var += std::pow(x[size_t(n * A + a)] - mean, 2) / double(N);
    const double invstd = 1 / std::sqrt(var + eps);
    o.mean.push_back(mean);
    o.invstd.push_back(invstd);
    o.running_mean.push_back(momentum * mean);                                             // from 0
    o.running_var.push_back((1 - momentum) + momentum * var * double(N) / double(N - 1));  // from 1
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double xhat = (x[size_t(n * A + a)] - mean) * invstd;
      sum_dy += dy[size_t(n * A + a)];
      sum_dy_xhat += dy[size_t(n * A + a)] * xhat;
    }
    o.dgamma.push_back(sum_dy_xhat);
    o.dbeta.push_back(sum_dy);
  }
  o.y.resize(x.size());
  o.dx.resize(x.size());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t a = 0; a < A; ++a) {
      const size_t i = size_t(n * A + a);
      const double xhat = (x[i] - o.mean[size_t(a)]) * o.invstd[size_t(a)];
      o.y[i] = gamma[size_t(a)] * xhat + beta[size_t(a)];
      o.dx[i] = gamma[size_t(a)] * o.invstd[size_t(a)] *
                (dy[i] - o.dbeta[size_t(a)] / double(N) - xhat * o.dgamma[size_t(a)] / double(N));
    }
  }
  return o;
}

std::vector<double> values(const Tensor& t) {
  if (t.dtype() == DType::f64) return {t.data<double>(), t.data<double>() + t.numel()};
  return testing::to_double(t);
}

Tensor filled(const Shape& shape, DType dtype, const std::vector<double>& v) {
  Tensor t(shape, dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f64) {
      t.data<double>()[i] = v[i];
    } else {
      t.data<float>()[i] = float(v[i]);
    }
  }
  return t;
}

TEST(BatchNormPerActivation, TrainingForwardAndBackwardMatchTheOracle) {
  const Shape shapes[] = {{2, 3, 4, 5}, {5, 7}, {3, 1, 1, 1}, {7, 2, 3}};
  Random rng(21);
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::f32, DType::f64}) {
      SCOPED_TRACE(shape_str(shape) + " " + dtype_name(dtype));
      Context ctx;
      const int64_t N = shape[0], A = shape_numel(shape) / N;
      const Shape a_shape(shape.begin() + 1, shape.end());
      // Values on a grid of 1/8 are exact in both dtypes: the oracle sees what the kernel sees.
      auto grid = [&](int64_t n, double lo, double hi) {
        std::vector<double> v(static_cast<size_t>(n));
        for (double& e : v) e = std::round(rng.uniform(lo, hi) * 8) / 8;
        return v;
      };
      const std::vector<double> xv = grid(N * A, -2, 2), gv = grid(A, 0.5, 1.5),
                                bv = grid(A, -1, 1), dyv = grid(N * A, -1, 1);
      // eps as the kernel receives it (a float).
      const Oracle want = oracle(N, A, xv, gv, bv, dyv, double(1e-5f), 0.25);
      const Tensor x = filled(shape, dtype, xv), gamma = filled(a_shape, dtype, gv),
                   beta = filled(a_shape, dtype, bv), dy = filled(shape, dtype, dyv);
      Tensor y(shape, dtype), mean(a_shape, dtype), invstd(a_shape, dtype),
          rmean = filled(a_shape, dtype, std::vector<double>(size_t(A), 0.0)),
          rvar = filled(a_shape, dtype, std::vector<double>(size_t(A), 1.0)),
          count = filled({1}, dtype, {0.0});
      batch_norm_per_activation_forward_training(ctx, x, gamma, beta, 1e-5f, 0.25f, y, mean, invstd,
                                                 rmean, rvar, count);
      Tensor dx(shape, dtype), dgamma = filled(a_shape, dtype, std::vector<double>(size_t(A), 0)),
                               dbeta = filled(a_shape, dtype, std::vector<double>(size_t(A), 0));
      batch_norm_per_activation_backward(ctx, x, dy, gamma, mean, invstd, true, dx, dgamma, dbeta);
      // f32: sums in double, a few float roundings per element; f64: the reference in double.
      const double tol = dtype == DType::f32 ? 2e-6 : 1e-12;
      auto close = [&](const Tensor& got, const std::vector<double>& w) {
        const std::vector<double> g = values(got);
        double diff = 0, norm = 0;
        for (size_t i = 0; i < g.size(); ++i) {
          diff += (g[i] - w[i]) * (g[i] - w[i]);
          norm += w[i] * w[i];
        }
        return std::sqrt(diff / std::max(norm, 1e-30));
      };
      EXPECT_LT(close(y, want.y), tol);
      EXPECT_LT(close(mean, want.mean), tol);
      EXPECT_LT(close(invstd, want.invstd), tol);
      EXPECT_LT(close(rmean, want.running_mean), tol);
      EXPECT_LT(close(rvar, want.running_var), tol);
      EXPECT_LT(close(dx, want.dx), tol * 10);  // a difference of nearly equal sums
      EXPECT_LT(close(dgamma, want.dgamma), tol);
      EXPECT_LT(close(dbeta, want.dbeta), tol);
      EXPECT_EQ(values(count)[0], 1.0);
    }
  }
}

TEST(BatchNormPerActivation, InferenceUsesTheRunningStatisticsPerActivation) {
  Context ctx;
  const Tensor x = Tensor::from_vector({2, 3}, {1, 2, 3, 5, 6, 7});
  const Tensor rmean = Tensor::from_vector({3}, {1, 0, -1}),
               rvar = Tensor::from_vector({3}, {4, 1, 0.25});
  Tensor y = testing::poisoned({2, 3}), mean({3}), invstd({3}), none;
  batch_norm_per_activation_forward_inference(ctx, x, none, none, rmean, rvar, 0.0f, y, mean,
                                              invstd);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 2, 8, 2, 6, 16}));
}

TEST(BatchNormPerActivation, ParametersMustHaveTheActivationShape) {
  Context ctx;
  Tensor x({4, 2, 3}), y({4, 2, 3}), gamma({2}), mean({2, 3}), invstd({2, 3}), none;
  EXPECT_CONTAINS(error_of([&] {
                    batch_norm_per_activation_forward_training(ctx, x, gamma, none, 1e-5f, 0.1f, y,
                                                               mean, invstd, none, none, none);
                  }),
                  "batch_norm_per_activation_forward_training: gamma is f32[2] on cpu, expected "
                  "f32[2, 3] on cpu");
  Tensor flat({4});
  EXPECT_CONTAINS(error_of([&] {
                    batch_norm_per_activation_forward_training(ctx, flat, none, none, 1e-5f, 0.1f,
                                                               y, mean, invstd, none, none, none);
                  }),
                  "expected at least 2 axes");
}

}  // namespace
}  // namespace crema::kernels
