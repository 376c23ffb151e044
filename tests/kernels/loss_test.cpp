// Pointwise losses (sigmoid cross-entropy, Euclidean) on the CPU: the reference by hand and
// against central differences in double, stability at large logits, the CPU path against
// ref<double> under every normalization on sizes around and across its summation blocks (with
// poisoned outputs), bit-identical results for 1 and 2 threads, and the tensor checks.
#include "kernels/loss/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/support/numeric_gradient.h"

namespace crema::kernels {
namespace {

using crema::testing::expect_gradient;
using testing::kNaN;
using namespace loss_testing;

// outer x inner: one element, a few, LeNet-like, across the 8192-element summation blocks and the
// threading threshold.
const std::vector<Shape> kShapes = {{1, 1}, {7, 13}, {64, 10}, {3, 8192}, {5, 7001}};

TEST(LossNormalization, ParsesCaffeNames) {
  LossNormalization mode = LossNormalization::none;
  EXPECT_TRUE(parse_loss_normalization("batch_size", mode));
  EXPECT_EQ(mode, LossNormalization::batch_size);
  EXPECT_TRUE(parse_loss_normalization("valid", mode));
  EXPECT_EQ(mode, LossNormalization::valid);
  EXPECT_TRUE(parse_loss_normalization("full", mode));
  EXPECT_EQ(mode, LossNormalization::full);
  EXPECT_TRUE(parse_loss_normalization("none", mode));
  EXPECT_EQ(mode, LossNormalization::none);
  EXPECT_FALSE(parse_loss_normalization("mean", mode));
  EXPECT_EQ(mode, LossNormalization::none);  // untouched
}

TEST(SigmoidCrossEntropyRef, ByHand) {
  const std::vector<double> x = {0, 2, -3}, t = {1, 0, 0.5};
  int64_t counted = -1;
  const double loss = ref::sigmoid_cross_entropy_forward(3, x.data(), t.data(), {}, &counted);
  double want = 0;
  for (size_t k = 0; k < 3; ++k) {
    const double s = 1 / (1 + std::exp(-x[k]));
    want -= t[k] * std::log(s) + (1 - t[k]) * std::log(1 - s);
  }
  EXPECT_NEAR(loss, want, 1e-14);
  EXPECT_EQ(counted, 3);
  std::vector<double> dx(3, kNaN);
  ref::sigmoid_cross_entropy_backward(3, x.data(), t.data(), {}, 0.5, dx.data());
  EXPECT_NEAR(dx[0], 0.5 * (0.5 - 1), 1e-15);
  EXPECT_NEAR(dx[1], 0.5 / (1 + std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(dx[2], 0.5 * (1 / (1 + std::exp(3.0)) - 0.5), 1e-15);
}

TEST(SigmoidCrossEntropyRef, FiniteAtLargeLogits) {
  // log(sigmoid(-100)) and log(1 - sigmoid(100)) in the naive form are log(0) in float.
  const std::vector<float> x = {100, -100, 100, -100}, t = {1, 0, 0, 1};
  const double loss = ref::sigmoid_cross_entropy_forward(4, x.data(), t.data(), {}, nullptr);
  EXPECT_NEAR(loss, 200.0, 1e-4);
  std::vector<float> dx(4);
  ref::sigmoid_cross_entropy_backward(4, x.data(), t.data(), {}, 1.0f, dx.data());
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 1, -1}));
}

TEST(SigmoidCrossEntropyRef, IgnoreLabel) {
  const std::vector<double> x = {0.5, -1, 2}, t = {1, 255, 0};
  SigmoidCrossEntropyOptions options;
  options.has_ignore_label = true;
  options.ignore_label = 255;
  int64_t counted = -1;
  const double with = ref::sigmoid_cross_entropy_forward(3, x.data(), t.data(), options, &counted);
  const std::vector<double> x2 = {0.5, 2}, t2 = {1, 0};
  EXPECT_DOUBLE_EQ(with, ref::sigmoid_cross_entropy_forward(2, x2.data(), t2.data(), {}, nullptr));
  EXPECT_EQ(counted, 2);
  std::vector<double> dx(3, kNaN);
  ref::sigmoid_cross_entropy_backward(3, x.data(), t.data(), options, 1.0, dx.data());
  EXPECT_EQ(dx[1], 0.0);
}

TEST(SigmoidCrossEntropyRef, BackwardMatchesFiniteDifferences) {
  Random rng(3);
  const std::vector<double> x = testing::to_double(testing::random_values(rng, 12, -5, 5));
  std::vector<double> t = testing::to_double(testing::random_values(rng, 12, 0, 1));
  t[4] = -1;  // ignored
  SigmoidCrossEntropyOptions options;
  options.has_ignore_label = true;
  std::vector<double> dx(12);
  ref::sigmoid_cross_entropy_backward(12, x.data(), t.data(), options, 0.7, dx.data());
  expect_gradient(x, dx, [&](const std::vector<double>& at) {
    return 0.7 * ref::sigmoid_cross_entropy_forward(12, at.data(), t.data(), options, nullptr);
  });
}

TEST(EuclideanLossRef, ByHandAndFiniteDifferences) {
  const std::vector<double> a = {1, 2, 3}, b = {0, 4, 3.5};
  EXPECT_DOUBLE_EQ(ref::euclidean_loss_forward(3, a.data(), b.data()), 1 + 4 + 0.25);
  std::vector<double> da(3), db(3);
  ref::euclidean_loss_backward(3, a.data(), b.data(), 0.5, da.data(), db.data());
  EXPECT_EQ(da, (std::vector<double>{0.5, -1, -0.25}));
  EXPECT_EQ(db, (std::vector<double>{-0.5, 1, 0.25}));
  expect_gradient(a, da, [&](const std::vector<double>& at) {
    return 0.25 * ref::euclidean_loss_forward(3, at.data(), b.data());
  });
  expect_gradient(b, db, [&](const std::vector<double>& at) {
    return 0.25 * ref::euclidean_loss_forward(3, a.data(), at.data());
  });
}

TEST(SigmoidCrossEntropyCpu, MatchesReference) {
  uint64_t seed = 10;
  for (const Shape& shape : kShapes) {
    const int64_t n = shape_numel(shape), outer = shape[0], inner = n / outer;
    Random rng(++seed);
    const Tensor x = testing::random_tensor(rng, shape, -8, 8);
    const Tensor t = Tensor::from_vector(shape, targets(rng, n));
    const std::vector<double> xd = testing::to_double(x), td = testing::to_double(t);
    const Tensor top_grad = Tensor::from_vector({1}, {0.75f});
    for (LossNormalization mode : kModes) {
      SCOPED_TRACE(shape_str(shape) + " normalization " + std::to_string(int(mode)));
      const SigmoidCrossEntropyOptions options = sigmoid_options(true, mode);
      const SigmoidExpected want = sigmoid_expected(outer, inner, xd, td, options, 0.75);
      std::vector<std::vector<float>> runs;
      for (int threads : {1, 2}) {
        Context ctx(Device::cpu(), 1, threads);
        Tensor loss = testing::poisoned({}), dx = testing::poisoned(shape);
        sigmoid_cross_entropy_forward(ctx, x, t, loss, options);
        sigmoid_cross_entropy_backward(ctx, x, t, top_grad, options, dx);
        EXPECT_NEAR(loss.to_vector()[0], want.loss, 1e-6 * std::abs(want.loss));
        EXPECT_LT(testing::rel_error(dx.to_vector(), want.dx), 1e-6);
        runs.push_back(loss.to_vector());
      }
      EXPECT_EQ(runs[0], runs[1]);  // the same bits for any thread count
    }
  }
}

TEST(EuclideanLossCpu, MatchesReference) {
  uint64_t seed = 20;
  for (const Shape& shape : kShapes) {
    const int64_t n = shape_numel(shape), outer = shape[0], inner = n / outer;
    Random rng(++seed);
    const Tensor a = testing::random_tensor(rng, shape, -3, 3);
    const Tensor b = testing::random_tensor(rng, {n}, -3, 3);  // any shape with n elements
    const std::vector<double> ad = testing::to_double(a), bd = testing::to_double(b);
    const Tensor top_grad = Tensor::from_vector({}, {-1.5f});
    const double sum = ref::euclidean_loss_forward(n, ad.data(), bd.data());
    for (LossNormalization mode : kModes) {
      SCOPED_TRACE(shape_str(shape) + " normalization " + std::to_string(int(mode)));
      const double normalizer = double(loss_normalizer(mode, outer, inner, n));
      std::vector<double> da_ref(static_cast<size_t>(n)), db_ref(static_cast<size_t>(n));
      ref::euclidean_loss_backward(n, ad.data(), bd.data(), -1.5 / normalizer, da_ref.data(),
                                   db_ref.data());
      std::vector<std::vector<float>> runs;
      for (int threads : {1, 2}) {
        Context ctx(Device::cpu(), 1, threads);
        Tensor loss = testing::poisoned({1}), da = testing::poisoned(shape),
               db = testing::poisoned({n});
        euclidean_loss_forward(ctx, a, b, loss, mode);
        euclidean_loss_backward(ctx, a, b, top_grad, mode, &da, &db);
        const double want = sum / (2 * normalizer);
        EXPECT_NEAR(loss.to_vector()[0], want, 1e-6 * want);
        EXPECT_LT(testing::rel_error(da.to_vector(), da_ref), 1e-6);
        EXPECT_LT(testing::rel_error(db.to_vector(), db_ref), 1e-6);
        runs.push_back(loss.to_vector());
      }
      EXPECT_EQ(runs[0], runs[1]);
    }
  }
}

TEST(EuclideanLossCpu, OneGradientOnly) {
  Context ctx;
  const Tensor a = Tensor::from_vector({2}, {1, 2}), b = Tensor::from_vector({2}, {3, 5});
  const Tensor top_grad = Tensor::from_vector({1}, {1.0f});
  Tensor db = testing::poisoned({2});
  euclidean_loss_backward(ctx, a, b, top_grad, LossNormalization::none, nullptr, &db);
  EXPECT_EQ(db.to_vector(), (std::vector<float>{2, 3}));
}

// float64 on the CPU runs the reference, normalized as float32 is: the Tensor-level gradient is
// top_grad times the central difference of the Tensor-level loss.
TEST(PointwiseLoss, Float64RunsTheReferenceNormalized) {
  Context ctx;
  const Shape shape = {3, 4};
  Random rng(12);
  const std::vector<double> x = testing::to_double(testing::random_values(rng, 12, -3, 3));
  const std::vector<double> t = testing::to_double(targets(rng, 12));
  const Tensor targets64 = f64_tensor(shape, t), top_grad = f64_tensor({1}, {0.7});
  for (LossNormalization mode : kModes) {
    SCOPED_TRACE("normalization " + std::to_string(int(mode)));
    const SigmoidCrossEntropyOptions options = sigmoid_options(true, mode);
    auto loss_at = [&](const std::vector<double>& at) {
      Tensor loss({1}, DType::f64);
      sigmoid_cross_entropy_forward(ctx, f64_tensor(shape, at), targets64, loss, options);
      return 0.7 * loss.data<double>()[0];
    };
    EXPECT_NEAR(loss_at(x), 0.7 * sigmoid_expected(3, 4, x, t, options, 0.7).loss, 1e-15);
    Tensor dx(shape, DType::f64);
    sigmoid_cross_entropy_backward(ctx, f64_tensor(shape, x), targets64, top_grad, options, dx);
    expect_gradient(x, std::vector<double>(dx.data<double>(), dx.data<double>() + 12), loss_at);

    const Tensor b = f64_tensor(shape, testing::to_double(testing::random_values(rng, 12, -3, 3)));
    auto euclidean_at = [&](const std::vector<double>& at) {
      Tensor loss({1}, DType::f64);
      euclidean_loss_forward(ctx, f64_tensor(shape, at), b, loss, mode);
      return 0.7 * loss.data<double>()[0];
    };
    Tensor da(shape, DType::f64);
    euclidean_loss_backward(ctx, f64_tensor(shape, x), b, top_grad, mode, &da, nullptr);
    expect_gradient(x, std::vector<double>(da.data<double>(), da.data<double>() + 12),
                    euclidean_at);
  }
}

TEST(PointwiseLoss, RejectsMismatchedTensors) {
  Context ctx;
  const Tensor x = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor t5 = Tensor::from_vector({5}, {0, 1, 0, 1, 0});
  Tensor loss(Shape{}), loss2({2}), dx({2, 3}), dx_bad({3, 2});
  const Tensor one = Tensor::from_vector({1}, {1.0f});
  try {
    sigmoid_cross_entropy_forward(ctx, x, t5, loss, {});
    ADD_FAILURE() << "no error for 5 targets";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("targets"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6 elements"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sigmoid_cross_entropy_forward(ctx, x, x, loss2, {}), Error);
  EXPECT_THROW(sigmoid_cross_entropy_backward(ctx, x, x, one, {}, dx_bad), Error);
  EXPECT_THROW(euclidean_loss_forward(ctx, x, t5, loss, LossNormalization::full), Error);
  EXPECT_THROW(euclidean_loss_backward(ctx, x, x, loss2, LossNormalization::full, &dx, nullptr),
               Error);
  EXPECT_THROW(euclidean_loss_backward(ctx, x, x, one, LossNormalization::full, nullptr, &dx_bad),
               Error);
}

}  // namespace
}  // namespace crema::kernels
