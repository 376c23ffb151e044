// Batch normalization on the CPU: ref<double> and the fast path against PyTorch's golden values
// (two training steps, running statistics, eval mode), the fast path against ref<double> on
// awkward shapes (both layouts, optional tensors absent, parameter gradients accumulating,
// in place), thread-count independence, and the dispatch's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm.h"
#include "tests/fixtures/norm_fixture.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

using testing::kNaN;
using testing::rel_error;

// ||out - ref|| / ||ref|| for a double-precision result.
double rel_error_d(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// ---- PyTorch golden values ----

class BatchNormGolden : public ::testing::TestWithParam<std::string> {
 protected:
  crema::testing::NormFixture f;
  std::string name(const std::string& key) const { return GetParam() + "." + key; }
};

TEST_P(BatchNormGolden, ReferenceMatchesPyTorch) {
  const Shape shape = f.shape(name("x1"));
  const BatchNormShape s = batch_norm_shape(shape);
  const std::vector<double> hyper = f.doubles(name("hyper"));
  const double eps = hyper[0], momentum = hyper[1];
  const std::vector<double> x1 = f.doubles(name("x1")), x2 = f.doubles(name("x2"));
  const std::vector<double> gamma = f.doubles(name("weight")), beta = f.doubles(name("bias"));
  const std::vector<double> dy = f.doubles(name("dy"));
  const size_t n = x1.size(), C = size_t(s.C);
  std::vector<double> y(n), dx(n), mean(C), invstd(C), rm(C, 0.0), rv(C, 1.0), tracked(1, 0.0);
  std::vector<double> dgamma(C, 0.0), dbeta(C, 0.0);

  ref::batch_norm_forward_training(s, x1.data(), gamma.data(), beta.data(), eps, momentum, y.data(),
                                   mean.data(), invstd.data(), rm.data(), rv.data(),
                                   tracked.data());
  EXPECT_LT(rel_error_d(y, f.doubles(name("y1"))), 1e-12);
  ref::batch_norm_backward(s, x1.data(), dy.data(), gamma.data(), mean.data(), invstd.data(), true,
                           dx.data(), dgamma.data(), dbeta.data());
  EXPECT_LT(rel_error_d(dx, f.doubles(name("dx1"))), 1e-12);
  EXPECT_LT(rel_error_d(dgamma, f.doubles(name("dweight1"))), 1e-12);
  EXPECT_LT(rel_error_d(dbeta, f.doubles(name("dbias1"))), 1e-12);

  ref::batch_norm_forward_training(s, x2.data(), gamma.data(), beta.data(), eps, momentum, y.data(),
                                   mean.data(), invstd.data(), rm.data(), rv.data(),
                                   tracked.data());
  EXPECT_LT(rel_error_d(y, f.doubles(name("y2"))), 1e-12);
  EXPECT_LT(rel_error_d(rm, f.doubles(name("running_mean"))), 1e-12);
  EXPECT_LT(rel_error_d(rv, f.doubles(name("running_var"))), 1e-12);
  EXPECT_EQ(tracked, f.doubles(name("num_batches_tracked")));

  std::fill(dgamma.begin(), dgamma.end(), 0.0);
  std::fill(dbeta.begin(), dbeta.end(), 0.0);
  ref::batch_norm_forward_inference(s, x1.data(), gamma.data(), beta.data(), rm.data(), rv.data(),
                                    eps, y.data(), mean.data(), invstd.data());
  EXPECT_LT(rel_error_d(y, f.doubles(name("eval_y"))), 1e-12);
  ref::batch_norm_backward(s, x1.data(), dy.data(), gamma.data(), mean.data(), invstd.data(), false,
                           dx.data(), dgamma.data(), dbeta.data());
  EXPECT_LT(rel_error_d(dx, f.doubles(name("eval_dx"))), 1e-12);
  EXPECT_LT(rel_error_d(dgamma, f.doubles(name("eval_dweight"))), 1e-12);
  EXPECT_LT(rel_error_d(dbeta, f.doubles(name("eval_dbias"))), 1e-12);
}

TEST_P(BatchNormGolden, CpuMatchesPyTorch) {
  Context ctx;
  const Shape shape = f.shape(name("x1"));
  const int64_t C = shape[1];
  const std::vector<double> hyper = f.doubles(name("hyper"));
  const float eps = float(hyper[0]), momentum = float(hyper[1]);
  const Tensor x1 = f.input(name("x1")), x2 = f.input(name("x2")), dy = f.input(name("dy"));
  const Tensor gamma = f.input(name("weight")), beta = f.input(name("bias"));
  Tensor y = testing::poisoned(shape), dx = testing::poisoned(shape);
  Tensor mean(Shape{C}), invstd(Shape{C}), rm = ctx.zeros({C}), rv(Shape{C}),
                                           tracked = ctx.zeros({1});
  rv.fill(1.0f);
  Tensor dgamma = ctx.zeros({C}), dbeta = ctx.zeros({C});

  batch_norm_forward_training(ctx, x1, gamma, beta, eps, momentum, y, mean, invstd, rm, rv,
                              tracked);
  EXPECT_LT(rel_error(y.to_vector(), f.doubles(name("y1"))), 1e-5);
  batch_norm_backward(ctx, x1, dy, gamma, mean, invstd, true, dx, dgamma, dbeta);
  EXPECT_LT(rel_error(dx.to_vector(), f.doubles(name("dx1"))), 1e-5);
  EXPECT_LT(rel_error(dgamma.to_vector(), f.doubles(name("dweight1"))), 1e-5);
  EXPECT_LT(rel_error(dbeta.to_vector(), f.doubles(name("dbias1"))), 1e-5);

  batch_norm_forward_training(ctx, x2, gamma, beta, eps, momentum, y, mean, invstd, rm, rv,
                              tracked);
  EXPECT_LT(rel_error(y.to_vector(), f.doubles(name("y2"))), 1e-5);
  EXPECT_LT(rel_error(rm.to_vector(), f.doubles(name("running_mean"))), 1e-5);
  EXPECT_LT(rel_error(rv.to_vector(), f.doubles(name("running_var"))), 1e-5);
  EXPECT_EQ(testing::to_double(tracked), f.doubles(name("num_batches_tracked")));

  dgamma.fill(0.0f);
  dbeta.fill(0.0f);
  batch_norm_forward_inference(ctx, x1, gamma, beta, rm, rv, eps, y, mean, invstd);
  EXPECT_LT(rel_error(y.to_vector(), f.doubles(name("eval_y"))), 1e-5);
  batch_norm_backward(ctx, x1, dy, gamma, mean, invstd, false, dx, dgamma, dbeta);
  EXPECT_LT(rel_error(dx.to_vector(), f.doubles(name("eval_dx"))), 1e-5);
  EXPECT_LT(rel_error(dgamma.to_vector(), f.doubles(name("eval_dweight"))), 1e-5);
  EXPECT_LT(rel_error(dbeta.to_vector(), f.doubles(name("eval_dbias"))), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(BatchNorm, BatchNormGolden, ::testing::Values("bn2d", "bn1d"));

// ---- the fast path against ref<double> ----

struct Case {
  Shape shape;
  bool affine;
};

std::string describe(const Case& c) {
  return shape_str(c.shape) + (c.affine ? " affine" : " no affine");
}

// Runs training forward, both backwards and the inference forward through the Tensor API on the
// CPU and compares every output with ref<double>.
void check_against_reference(const Case& tc, int threads, uint64_t seed) {
  SCOPED_TRACE(describe(tc) + ", " + std::to_string(threads) + " thread(s)");
  Context ctx(Device::cpu(), 1, threads);
  Random rng(seed);
  const BatchNormShape s = batch_norm_shape(tc.shape);
  const int64_t C = s.C;
  // Channels with different offsets, so that a wrong channel index shows.
  std::vector<float> xv = testing::random_values(rng, shape_numel(tc.shape));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += float((int64_t(i) / s.S) % C) * 0.7f - 1.0f;
  const Tensor x = Tensor::from_vector(tc.shape, xv), dy = testing::random_tensor(rng, tc.shape);
  const Tensor gamma = tc.affine ? testing::random_tensor(rng, {C}, 0.5, 1.5) : Tensor();
  const Tensor beta = tc.affine ? testing::random_tensor(rng, {C}) : Tensor();
  Tensor rm = testing::random_tensor(rng, {C}), rv = testing::random_tensor(rng, {C}, 0.5, 2.0);
  Tensor tracked = Tensor::from_vector({1}, {3.0f});
  const std::vector<double> rm0 = testing::to_double(rm), rv0 = testing::to_double(rv);
  Tensor y = testing::poisoned(tc.shape), mean = testing::poisoned({C});
  Tensor invstd = testing::poisoned({C});
  const float eps = 1e-3f, momentum = 0.2f;

  const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
  const std::vector<double> gd = tc.affine ? testing::to_double(gamma) : std::vector<double>();
  const std::vector<double> bd = tc.affine ? testing::to_double(beta) : std::vector<double>();
  const double* g = tc.affine ? gd.data() : nullptr;
  const double* b = tc.affine ? bd.data() : nullptr;
  std::vector<double> y_ref(xd.size()), mean_ref(static_cast<size_t>(C)),
      invstd_ref(static_cast<size_t>(C));
  std::vector<double> rm_ref = rm0, rv_ref = rv0, tracked_ref{3.0};

  batch_norm_forward_training(ctx, x, gamma, beta, eps, momentum, y, mean, invstd, rm, rv, tracked);
  ref::batch_norm_forward_training(s, xd.data(), g, b, double(eps), double(momentum), y_ref.data(),
                                   mean_ref.data(), invstd_ref.data(), rm_ref.data(), rv_ref.data(),
                                   tracked_ref.data());
  EXPECT_LT(rel_error(y.to_vector(), y_ref), 1e-5);
  EXPECT_LT(rel_error(mean.to_vector(), mean_ref), 1e-5);
  EXPECT_LT(rel_error(invstd.to_vector(), invstd_ref), 1e-5);
  EXPECT_LT(rel_error(rm.to_vector(), rm_ref), 1e-5);
  EXPECT_LT(rel_error(rv.to_vector(), rv_ref), 1e-5);
  EXPECT_EQ(tracked.to_vector(), std::vector<float>{4.0f});

  for (const bool batch_stats : {true, false}) {
    SCOPED_TRACE(batch_stats ? "batch statistics" : "fixed statistics");
    // Parameter gradients accumulate onto what is there.
    const Tensor dgamma0 = testing::random_tensor(rng, {C}),
                 dbeta0 = testing::random_tensor(rng, {C});
    Tensor dgamma = tc.affine ? dgamma0.clone() : Tensor(),
           dbeta = tc.affine ? dbeta0.clone() : Tensor();
    Tensor dx = testing::poisoned(tc.shape);
    std::vector<double> dx_ref(xd.size()), dgamma_ref = testing::to_double(dgamma0),
                                           dbeta_ref = testing::to_double(dbeta0);
    batch_norm_backward(ctx, x, dy, gamma, mean, invstd, batch_stats, dx, dgamma, dbeta);
    const std::vector<double> md = testing::to_double(mean), id = testing::to_double(invstd);
    ref::batch_norm_backward(s, xd.data(), dyd.data(), g, md.data(), id.data(), batch_stats,
                             dx_ref.data(), tc.affine ? dgamma_ref.data() : nullptr,
                             tc.affine ? dbeta_ref.data() : nullptr);
    EXPECT_LT(rel_error(dx.to_vector(), dx_ref), 1e-5);
    if (tc.affine) {
      EXPECT_LT(rel_error(dgamma.to_vector(), dgamma_ref), 1e-5);
      EXPECT_LT(rel_error(dbeta.to_vector(), dbeta_ref), 1e-5);
    }
  }

  Tensor mean_i = testing::poisoned({C}), invstd_i = testing::poisoned({C});
  batch_norm_forward_inference(ctx, x, gamma, beta, rm, rv, eps, y, mean_i, invstd_i);
  const std::vector<double> rmd = testing::to_double(rm), rvd = testing::to_double(rv);
  ref::batch_norm_forward_inference(s, xd.data(), g, b, rmd.data(), rvd.data(), double(eps),
                                    y_ref.data(), mean_ref.data(), invstd_ref.data());
  EXPECT_LT(rel_error(y.to_vector(), y_ref), 1e-6);
  EXPECT_LT(rel_error(mean_i.to_vector(), mean_ref), 1e-7);
  EXPECT_LT(rel_error(invstd_i.to_vector(), invstd_ref), 1e-6);
}

const std::vector<Case> kCases = {
    {{2, 1, 1, 1}, true},      // two values in the only channel
    {{1, 3, 7, 5}, true},      // N = 1
    {{4, 5, 3, 3}, false},     // no affine
    {{3, 2, 2, 3, 5}, true},   // 5 axes
    {{5, 17}, true},           // [N, C]: the rows layout
    {{9, 300}, false},         // more channels than one column block
    {{33, 3, 1}, true},        // S = 1 with three axes
    {{16, 20, 12, 12}, true},  // LeNet-like, enough to use threads
};

TEST(BatchNorm, CpuMatchesReferenceOnAwkwardShapes) {
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    for (const int threads : {1, 2}) check_against_reference(c, threads, seed);
    ++seed;
  }
}

TEST(BatchNorm, ResultsDoNotDependOnTheThreadCount) {
  for (const Shape& shape : {Shape{16, 20, 12, 12}, Shape{300, 129}}) {
    std::vector<std::vector<float>> outputs;
    for (const int threads : {1, 2}) {
      Context ctx(Device::cpu(), 1, threads);
      Random rng(5);
      const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
      const int64_t C = shape[1];
      Tensor y(shape), dx(shape), mean(Shape{C}), invstd(Shape{C}), none;
      Tensor rm = ctx.zeros({C}), rv = ctx.zeros({C}), dgamma = ctx.zeros({C});
      batch_norm_forward_training(ctx, x, none, none, 1e-5f, 0.1f, y, mean, invstd, rm, rv, none);
      batch_norm_backward(ctx, x, dy, none, mean, invstd, true, dx, dgamma, none);
      std::vector<float> all = y.to_vector();
      for (const Tensor* t : {&dx, &mean, &invstd, &rm, &rv, &dgamma}) {
        const std::vector<float> v = t->to_vector();
        all.insert(all.end(), v.begin(), v.end());
      }
      outputs.push_back(all);
    }
    EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].size() * sizeof(float)),
              0)
        << shape_str(shape);
  }
}

TEST(BatchNorm, InPlaceMatchesOutOfPlace) {
  Context ctx;
  for (const Shape& shape : {Shape{3, 4, 5, 2}, Shape{6, 7}}) {
    Random rng(9);
    const int64_t C = shape[1];
    const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
    const Tensor gamma = testing::random_tensor(rng, {C}), beta = testing::random_tensor(rng, {C});
    Tensor y(shape), dx(shape), mean(Shape{C}), invstd(Shape{C}), none;
    batch_norm_forward_training(ctx, x, gamma, beta, 1e-5f, 0.1f, y, mean, invstd, none, none,
                                none);
    batch_norm_backward(ctx, x, dy, gamma, mean, invstd, true, dx, none, none);

    Tensor xy = x.clone(), dydx = dy.clone();
    batch_norm_forward_training(ctx, xy, gamma, beta, 1e-5f, 0.1f, xy, mean, invstd, none, none,
                                none);
    EXPECT_EQ(xy.to_vector(), y.to_vector()) << shape_str(shape);
    batch_norm_backward(ctx, x, dydx, gamma, mean, invstd, true, dydx, none, none);
    EXPECT_EQ(dydx.to_vector(), dx.to_vector()) << shape_str(shape);
  }
}

TEST(BatchNorm, OnlyParameterGradientsWhenDxIsAbsent) {
  Context ctx;
  Random rng(4);
  const Shape shape{3, 4, 2, 5};
  const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
  Tensor y(shape), mean(Shape{4}), invstd(Shape{4}), none, dgamma = ctx.zeros({4}),
                                                           dbeta = ctx.zeros({4});
  batch_norm_forward_training(ctx, x, none, none, 1e-5f, 0.1f, y, mean, invstd, none, none, none);
  batch_norm_backward(ctx, x, dy, none, mean, invstd, true, none, dgamma, dbeta);
  const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
  const std::vector<double> md = testing::to_double(mean), id = testing::to_double(invstd);
  std::vector<double> dgamma_ref(4, 0.0), dbeta_ref(4, 0.0);
  ref::batch_norm_backward<double>(batch_norm_shape(shape), xd.data(), dyd.data(), nullptr, md.data(),
                                   id.data(), true, nullptr, dgamma_ref.data(), dbeta_ref.data());
  EXPECT_LT(rel_error(dgamma.to_vector(), dgamma_ref), 1e-5);
  EXPECT_LT(rel_error(dbeta.to_vector(), dbeta_ref), 1e-5);
}

TEST(BatchNorm, BadArgumentsAreErrors) {
  Context ctx;
  const Shape shape{2, 3, 4};
  Tensor x(shape), y(shape), mean(Shape{3}), invstd(Shape{3}), none, short_gamma(Shape{2});
  x.fill(1.0f);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              batch_norm_forward_training(ctx, x, none, none, -1e-5f, 0.1f, y, mean, invstd, none,
                                          none, none);
            }).find("eps"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward_training(ctx, x, none, none, 1e-5f, 1.5f, y, mean, invstd, none,
                                          none, none);
            }).find("momentum"),
            std::string::npos);
  EXPECT_NE(message([&] {
              batch_norm_forward_training(ctx, x, short_gamma, none, 1e-5f, 0.1f, y, mean, invstd,
                                          none, none, none);
            }).find("gamma"),
            std::string::npos);
  Tensor single(Shape{1, 3}), single_y(Shape{1, 3});
  EXPECT_NE(message([&] {
              batch_norm_forward_training(ctx, single, none, none, 1e-5f, 0.1f, single_y, mean,
                                          invstd, none, none, none);
            }).find("more than one value"),
            std::string::npos);
  Tensor flat(Shape{6});
  EXPECT_NE(message([&] {
              batch_norm_forward_inference(ctx, flat, none, none, mean, invstd, 1e-5f, flat, mean,
                                           invstd);
            }).find("at least 2 axes"),
            std::string::npos);
}

}  // namespace
}  // namespace crema::kernels
