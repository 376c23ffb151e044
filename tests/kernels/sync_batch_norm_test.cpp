// Synchronized batch normalization's kernels on the CPU (ref::, float and double): on one rank
// (the local sums are the global ones) sums -> statistics -> inference forward is BatchNorm's
// training forward, and the sync backward is BatchNorm's backward through the batch statistics,
// with dgamma and dbeta accumulating; the sums against plain loops; a constant channel's variance
// is 0, never a negative rounding; the Tensor-level checks name the op and the tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/sync_batch_norm.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::rel_error;

// Channels with different offsets, so that a wrong channel index shows.
std::vector<double> channel_values(Random& rng, const Shape& shape) {
  const BatchNormShape s = batch_norm_shape(shape);
  std::vector<double> v = testing::to_double(testing::random_values(rng, shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] += double((int64_t(i) / s.S) % s.C) * 0.7 - 1.0;
  return v;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double largest = 0.0;
  for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::fabs(a[i] - b[i]));
  return largest;
}

void one_rank_is_batch_norm(const Shape& shape, bool affine) {
  SCOPED_TRACE(shape_str(shape) + (affine ? " affine" : " no affine"));
  Random rng(3);
  const BatchNormShape s = batch_norm_shape(shape);
  const size_t C = size_t(s.C), n = size_t(shape_numel(shape));
  const std::vector<double> x = channel_values(rng, shape);
  const std::vector<double> dy = testing::to_double(testing::random_values(rng, int64_t(n)));
  const std::vector<double> gv = testing::to_double(testing::random_values(rng, s.C, 0.5, 1.5));
  const std::vector<double> bv = testing::to_double(testing::random_values(rng, s.C));
  const std::vector<double> rm0 = testing::to_double(testing::random_values(rng, s.C));
  const std::vector<double> rv0 = testing::to_double(testing::random_values(rng, s.C, 0.5, 2.0));
  const std::vector<double> dg0 = testing::to_double(testing::random_values(rng, s.C));
  const std::vector<double> db0 = testing::to_double(testing::random_values(rng, s.C));
  const double* g = affine ? gv.data() : nullptr;
  const double* b = affine ? bv.data() : nullptr;
  const double eps = 1e-3, momentum = 0.2;

  // BatchNorm's training forward.
  std::vector<double> y_bn(n), mean_bn(C), invstd_bn(C), rm_bn = rm0, rv_bn = rv0, seen_bn{3.0};
  ref::batch_norm_forward_training(s, x.data(), g, b, eps, momentum, y_bn.data(), mean_bn.data(),
                                   invstd_bn.data(), rm_bn.data(), rv_bn.data(), seen_bn.data());
  // The sync form on one rank.
  std::vector<double> sums(2 * C + 1, -1.0), mean(C), var(C), rm = rm0, rv = rv0, seen{3.0};
  ref::batch_norm_channel_sums(s, x.data(), sums.data());
  std::vector<double> plain(2 * C + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = size_t(int64_t(i) / s.S % s.C);
    plain[c] += x[i];
    plain[C + c] += x[i] * x[i];
  }
  plain[2 * C] = double(s.N * s.S);
  EXPECT_LT(max_difference(sums, plain), 1e-12);
  ref::batch_norm_statistics(s.C, sums.data(), momentum, mean.data(), var.data(), rm.data(),
                             rv.data(), seen.data());
  std::vector<double> y(n), save_mean(C), save_invstd(C);
  ref::batch_norm_forward_inference(s, x.data(), g, b, mean.data(), var.data(), eps, y.data(),
                                    save_mean.data(), save_invstd.data());
  EXPECT_LT(max_difference(y, y_bn), 1e-12);
  EXPECT_LT(max_difference(save_mean, mean_bn), 1e-12);
  EXPECT_LT(max_difference(save_invstd, invstd_bn), 1e-12);
  EXPECT_LT(max_difference(rm, rm_bn), 1e-12);
  EXPECT_LT(max_difference(rv, rv_bn), 1e-12);
  EXPECT_EQ(seen, seen_bn);

  // Backward: local = global on one rank.
  std::vector<double> dx_bn(n), dg_bn = dg0, db_bn = db0;
  ref::batch_norm_backward(s, x.data(), dy.data(), g, mean_bn.data(), invstd_bn.data(), true,
                           dx_bn.data(), dg_bn.data(), db_bn.data());
  std::vector<double> local(2 * C + 1, -1.0);
  ref::batch_norm_gradient_sums(s, x.data(), dy.data(), save_mean.data(), save_invstd.data(),
                                local.data());
  EXPECT_EQ(local[2 * C], double(s.N * s.S));
  for (const bool want_dx : {true, false}) {
    std::vector<double> dx(n, 7.0), dg = dg0, db = db0;
    ref::sync_batch_norm_backward(s, x.data(), dy.data(), g, save_mean.data(), save_invstd.data(),
                                  local.data(), local.data(), want_dx ? dx.data() : nullptr,
                                  dg.data(), db.data());
    if (want_dx) {
      EXPECT_LT(max_difference(dx, dx_bn), 1e-12);
    } else {
      EXPECT_EQ(dx, std::vector<double>(n, 7.0));  // untouched
    }
    EXPECT_LT(max_difference(dg, dg_bn), 1e-12);  // += onto dg0
    EXPECT_LT(max_difference(db, db_bn), 1e-12);
  }
}

TEST(SyncBatchNormKernels, OneRankIsBatchNorm) {
  one_rank_is_batch_norm({3, 4, 5, 2}, true);
  one_rank_is_batch_norm({1, 3, 1, 7}, true);
  one_rank_is_batch_norm({6, 5}, false);
  one_rank_is_batch_norm({2, 2, 1, 1}, true);  // two values per channel
}

TEST(SyncBatchNormKernels, AConstantChannelHasVarianceZero) {
  // sum x^2 - sum x * mean of equal values rounds to a tiny number of either sign: clamped at 0.
  const BatchNormShape s{7, 1, 3};
  const std::vector<float> x(21, 0.1f);
  std::vector<double> sums(3);
  ref::batch_norm_channel_sums(s, x.data(), sums.data());
  float mean = 0.0f, var = -1.0f;
  ref::batch_norm_statistics<float>(1, sums.data(), 0.1f, &mean, &var, nullptr, nullptr, nullptr);
  EXPECT_FLOAT_EQ(mean, 0.1f);
  EXPECT_GE(var, 0.0f);
  EXPECT_LT(var, 1e-12f);
}

TEST(SyncBatchNormKernels, TheTensorLevelChecksNameTheOpAndTheTensor) {
  Context ctx;
  const Tensor x = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor short_sums(Shape{6}, DType::f64);
  EXPECT_CONTAINS(crema::testing::error_of([&] { batch_norm_channel_sums(ctx, x, short_sums); }),
                  "batch_norm_channel_sums: sums is f64[6]");
  Tensor float_sums(Shape{7}, DType::f32);
  EXPECT_CONTAINS(crema::testing::error_of([&] { batch_norm_channel_sums(ctx, x, float_sums); }),
                  "batch_norm_channel_sums: sums is f32[7]");
  Tensor sums(Shape{7}, DType::f64), mean(Shape{3}), var(Shape{3}), none;
  batch_norm_channel_sums(ctx, x, sums);
  EXPECT_CONTAINS(crema::testing::error_of(
                      [&] { batch_norm_statistics(ctx, sums, 1.5f, mean, var, none, none, none); }),
                  "batch_norm_statistics: momentum 1.5");
  Tensor wrong_var(Shape{2});
  EXPECT_CONTAINS(crema::testing::error_of([&] {
                    batch_norm_statistics(ctx, sums, 0.1f, mean, wrong_var, none, none, none);
                  }),
                  "batch_norm_statistics: var is f32[2]");
}

}  // namespace
}  // namespace crema::kernels
