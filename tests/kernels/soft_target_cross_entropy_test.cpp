// Softmax cross-entropy against soft targets on the CPU: torch's cross_entropy with probability
// targets (tests/fixtures/make_batch_mix_fixtures.py), the reference against central differences,
// the fast path against the reference on awkward shapes and thread counts, one-hot targets
// against the label path, the argmax labels of Accuracy, and the refused calls.
#include "kernels/loss/soft_target_cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/accuracy/accuracy.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "tests/fixtures/safetensors_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using crema::testing::SafetensorsFixture;
using loss_testing::f64_tensor;
using testing::rel_error;

SoftmaxLossOptions smoothing(float eps,
                             LossNormalization normalization = LossNormalization::valid) {
  SoftmaxLossOptions o;
  o.label_smoothing = eps;
  o.normalization = normalization;
  return o;
}

// Probability rows (softmax of random values) of `shape` along axis 1, optionally scaled so that
// they do not sum to 1.
std::vector<float> soft_targets(Random& rng, const Shape& shape, float total = 1.0f) {
  const int64_t C = shape[1], inner = shape_count(shape, 2, int(shape.size()));
  std::vector<float> t = testing::random_values(rng, shape_numel(shape), -2, 2);
  for (int64_t o = 0; o < shape[0]; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(t[size_t((o * C + c) * inner + i)]);
      for (int64_t c = 0; c < C; ++c) {
        float& v = t[size_t((o * C + c) * inner + i)];
        v = float(total * std::exp(v) / s);
      }
    }
  }
  return t;
}

struct Result {
  std::vector<double> loss, dlogits;
};

// The Tensor-level pair in `dtype` on the CPU, top_grad 1.
Result run(const Shape& shape, const std::vector<float>& x, const std::vector<float>& t,
           const SoftmaxLossOptions& options, DType dtype, int threads = 0) {
  Context ctx(Device::cpu(), 1, threads);
  auto tensor = [&](const std::vector<float>& v) {
    return dtype == DType::f64 ? f64_tensor(shape, std::vector<double>(v.begin(), v.end()))
                               : Tensor::from_vector(shape, v);
  };
  const Tensor logits = tensor(x), targets = tensor(t);
  Tensor prob(shape, dtype), dlogits(shape, dtype), loss({1}, dtype), top_grad({1}, dtype);
  if (dtype == DType::f64) {
    top_grad.data<double>()[0] = 1.0;
  } else {
    top_grad.fill(1.0f);
  }
  soft_target_cross_entropy_forward(ctx, logits, targets, prob, loss, options);
  soft_target_cross_entropy_backward(ctx, prob, targets, top_grad, options, dlogits);
  auto values = [&](const Tensor& v) {
    if (dtype == DType::f32) return testing::to_double(v);
    return std::vector<double>(v.data<double>(), v.data<double>() + v.numel());
  };
  return {values(loss), values(dlogits)};
}

// Tolerances: float64 agrees with torch's float64 to rounding (1e-12 relative); float32 to its
// precision over sums of up to a few hundred terms (1e-5 relative).
TEST(SoftTargetCrossEntropy, MatchesTorchCrossEntropyWithProbabilityTargets) {
  const SafetensorsFixture f("batch_mix_fixtures.safetensors");
  const std::vector<std::pair<std::string, float>> cases = {{"xent_mixed", 0.0f},
                                                            {"xent_smoothed", 0.125f},
                                                            {"xent_unnormalized", 0.0f},
                                                            {"xent_spatial", 0.25f}};
  for (const auto& [name, eps] : cases) {
    SCOPED_TRACE(name);
    const Shape shape = f.shape(name + "_logits");
    const std::vector<float> x = f.floats(name + "_logits"), t = f.floats(name + "_targets");
    const std::vector<double> loss = f.doubles(name + "_loss");
    const std::vector<double> dlogits = f.doubles(name + "_dlogits");
    for (DType dtype : {DType::f64, DType::f32}) {
      const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
      const Result r = run(shape, x, t, smoothing(eps), dtype);
      EXPECT_NEAR(r.loss[0], loss[0], tol * std::abs(loss[0]));
      std::vector<float> d(r.dlogits.begin(), r.dlogits.end());
      if (dtype == DType::f64) {
        double worst = 0;
        for (size_t k = 0; k < d.size(); ++k) {
          worst = std::max(worst, std::abs(r.dlogits[k] - dlogits[k]));
        }
        EXPECT_LT(worst, 1e-13);
      } else {
        EXPECT_LT(rel_error(d, dlogits), tol);
      }
    }
  }
}

// Central differences of the float64 forward (step 1e-6) against the float64 backward.
TEST(SoftTargetCrossEntropy, GradientIsTheDerivativeOfTheLoss) {
  Random rng(11);
  const Shape shape = {2, 4, 3};
  const std::vector<float> x = testing::random_values(rng, 24, -3, 3);
  const std::vector<float> t = soft_targets(rng, shape, 0.7f);
  const SoftmaxLossOptions options = smoothing(0.15f, LossNormalization::batch_size);
  const Result r = run(shape, x, t, options, DType::f64);
  for (size_t k = 0; k < x.size(); ++k) {
    Context ctx;
    std::vector<double> xp(x.begin(), x.end()), xm = xp;
    const double h = 1e-6;
    xp[k] += h;
    xm[k] -= h;
    const Tensor targets = f64_tensor(shape, {t.begin(), t.end()});
    Tensor prob(shape, DType::f64), lp({1}, DType::f64), lm({1}, DType::f64);
    soft_target_cross_entropy_forward(ctx, f64_tensor(shape, xp), targets, prob, lp, options);
    soft_target_cross_entropy_forward(ctx, f64_tensor(shape, xm), targets, prob, lm, options);
    const double numeric = (lp.data<double>()[0] - lm.data<double>()[0]) / (2 * h);
    EXPECT_NEAR(r.dlogits[k], numeric, 1e-8) << "element " << k;
  }
}

// The fast path against the reference: [N, C] rows (a task per position), inner > 1 with a
// block boundary (kBlock = 256 positions: inner 300), N = 1, C = 1000; every normalization; the
// loss the same bits for 1 and 3 threads. float32 against float64: 1e-5 relative.
TEST(SoftTargetCrossEntropy, FastPathMatchesTheReference) {
  Random rng(5);
  const std::vector<Shape> shapes = {{64, 10}, {1, 1000}, {3, 7, 300}, {2, 3, 5, 7}, {40000, 3}};
  const std::vector<LossNormalization> modes = {LossNormalization::valid,
                                                LossNormalization::batch_size,
                                                LossNormalization::full, LossNormalization::none};
  for (const Shape& shape : shapes) {
    for (LossNormalization mode : modes) {
      SCOPED_TRACE(shape_str(shape) + " mode " + std::to_string(int(mode)));
      const std::vector<float> x = testing::random_values(rng, shape_numel(shape), -8, 8);
      const std::vector<float> t = soft_targets(rng, shape);
      const SoftmaxLossOptions options =
          smoothing(mode == LossNormalization::full ? 0.1f : 0.0f, mode);
      const Result want = run(shape, x, t, options, DType::f64);
      const Result one = run(shape, x, t, options, DType::f32, 1);
      const Result three = run(shape, x, t, options, DType::f32, 3);
      EXPECT_NEAR(one.loss[0], want.loss[0], 1e-5 * std::abs(want.loss[0]));
      EXPECT_EQ(one.loss, three.loss);
      EXPECT_LT(rel_error({one.dlogits.begin(), one.dlogits.end()}, want.dlogits), 1e-5);
      EXPECT_EQ(one.dlogits, three.dlogits);
    }
  }
}

// One-hot targets are the labels' loss: same value and gradient as softmax_cross_entropy, with
// and without label smoothing (float64: to rounding).
TEST(SoftTargetCrossEntropy, OneHotTargetsGiveTheLabelLoss) {
  Random rng(9);
  const Shape shape = {6, 5};
  const std::vector<float> x = testing::random_values(rng, 30, -4, 4);
  const std::vector<double> labels = {4, 0, 2, 2, 1, 3};
  std::vector<float> one_hot(30, 0.0f);
  for (size_t i = 0; i < labels.size(); ++i) one_hot[i * 5 + size_t(labels[i])] = 1.0f;
  for (float eps : {0.0f, 0.25f}) {
    const Result soft = run(shape, x, one_hot, smoothing(eps), DType::f64);
    Context ctx;
    const Tensor logits = f64_tensor(shape, {x.begin(), x.end()});
    Tensor prob(shape, DType::f64), d(shape, DType::f64), loss({1}, DType::f64);
    const Tensor top_grad = f64_tensor({1}, {1.0});
    const Tensor label_tensor = f64_tensor({6}, labels);
    softmax_cross_entropy_forward(ctx, logits, label_tensor, prob, loss, smoothing(eps));
    softmax_cross_entropy_backward(ctx, prob, label_tensor, top_grad, smoothing(eps), d);
    EXPECT_NEAR(soft.loss[0], loss.data<double>()[0], 1e-12);
    for (int64_t k = 0; k < 30; ++k)
      EXPECT_NEAR(soft.dlogits[size_t(k)], d.data<double>()[k], 1e-15);
  }
}

TEST(SoftTargetCrossEntropy, RefusedCalls) {
  Context ctx;
  const Tensor x({4, 3}), t({4, 3}), wrong({4});
  Tensor prob({4, 3}), loss({1});
  SoftmaxLossOptions ignoring;
  ignoring.has_ignore_label = true;
  EXPECT_CONTAINS(
      error_of([&] { soft_target_cross_entropy_forward(ctx, x, t, prob, loss, ignoring); }),
      "soft targets have no ignore_label");
  EXPECT_CONTAINS(
      error_of([&] { soft_target_cross_entropy_forward(ctx, x, t, prob, loss, smoothing(1.0f)); }),
      "label_smoothing 1.000000 is outside [0, 1)");
  EXPECT_CONTAINS(
      error_of([&] { soft_target_cross_entropy_forward(ctx, x, wrong, prob, loss, smoothing(0)); }),
      "targets is f32[4]");
}

// Accuracy's labels for soft targets: the first largest class per position, along the axis.
TEST(TargetLabels, FirstLargestClassPerPosition) {
  Context ctx;
  // [2, 3, 2]: positions (o, i); classes 2 apart.
  const Tensor t = Tensor::from_vector({2, 3, 2}, {0.2f, 0.5f, 0.7f, 0.5f, 0.1f, 0.0f,  //
                                                   0.3f, 0.3f, 0.3f, 0.6f, 0.4f, 0.1f});
  Tensor labels = testing::poisoned({4});
  target_labels(ctx, t, 1, labels);
  EXPECT_EQ(labels.to_vector(), (std::vector<float>{1, 0, 2, 1}));  // (0, 1): a tie, class 0
}

}  // namespace
}  // namespace crema::kernels
