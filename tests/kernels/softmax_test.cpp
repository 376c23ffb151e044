// Softmax and softmax cross-entropy: the reference by hand (stability under a large shift, an
// axis with inner > 1, FLT_MIN clamping, ignore_label), the softmax, log-softmax and
// cross-entropy backwards against central differences in double, the CPU path against ref<double>
// on awkward shapes with poisoned outputs (the normalized, device-resident loss API against the
// reference's sum and count under every normalization), in-place use, and the label errors.
#include "kernels/softmax/softmax.h"
#include "kernels/loss/softmax_cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/kernels/softmax_test_util.h"
#include "tests/support/numeric_gradient.h"

namespace crema::kernels {
namespace {

using testing::kNaN;
using namespace softmax_testing;

const double kLn2 = std::log(2.0), kLn3 = std::log(3.0);

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(SoftmaxRef, ByHand) {
  // exp(0) : exp(ln 2) : exp(ln 3) = 1 : 2 : 3.
  std::vector<double> y(3);
  const std::vector<double> x = {0, kLn2, kLn3};
  ref::softmax_forward<double>(1, 3, 1, x.data(), y.data());
  expect_near(y, {1 / 6.0, 2 / 6.0, 3 / 6.0}, 1e-15);
  // A shift of 1000 would overflow exp without the max subtraction.
  const std::vector<float> shifted = {1000, float(1000 + kLn2), float(1000 + kLn3)};
  std::vector<float> yf(3);
  ref::softmax_forward<float>(1, 3, 1, shifted.data(), yf.data());
  expect_near(testing::to_double(yf), {1 / 6.0, 2 / 6.0, 3 / 6.0}, 1e-4);
  // [1, 3, 2] along axis 1: classes are 2 apart.
  const std::vector<double> x2 = {0, kLn3, kLn2, 0, kLn3, kLn2};
  std::vector<double> y2(6);
  ref::softmax_forward<double>(1, 3, 2, x2.data(), y2.data());
  expect_near(y2, {1 / 6.0, 3 / 6.0, 2 / 6.0, 1 / 6.0, 3 / 6.0, 2 / 6.0}, 1e-15);
}

TEST(SoftmaxFastRef, ByHandAndWhereItOverflows) {
  // Without the max: exp(x) / sum exp(x), the same 1 : 2 : 3 for small logits.
  std::vector<double> y(3);
  const std::vector<double> x = {0, kLn2, kLn3};
  ref::softmax_fast_forward<double>(1, 3, 1, x.data(), y.data());
  expect_near(y, {1 / 6.0, 2 / 6.0, 3 / 6.0}, 1e-15);
  // A logit of 89 overflows float's exp: inf / inf. The accurate softmax is finite there.
  const std::vector<float> large = {89, 0, 1};
  std::vector<float> fast(3), accurate(3);
  ref::softmax_fast_forward<float>(1, 3, 1, large.data(), fast.data());
  ref::softmax_forward<float>(1, 3, 1, large.data(), accurate.data());
  EXPECT_TRUE(std::isnan(fast[0]));
  EXPECT_FLOAT_EQ(accurate[0], 1.0f);
}

TEST(SoftmaxFastCpu, MatchesReferenceAndRunsInPlace) {
  check_cpu_against_reference({ref::softmax_fast_forward<double>, ref::softmax_backward<double>,
                               softmax_fast_forward, softmax_backward},
                              2, 5.0);
}

TEST(SoftmaxCpu, MatchesReferenceAndRunsInPlace) {
  check_cpu_against_reference({ref::softmax_forward<double>, ref::softmax_backward<double>,
                               softmax_forward, softmax_backward},
                              1, 5.0);
}

using crema::testing::expect_gradient;

// ref's backward of a softmax-like op against central differences of L(x) = <dy, forward(x)>.
void expect_backward_matches_differences(void (*forward)(int64_t, int64_t, int64_t, const double*,
                                                         double*),
                                         void (*backward)(int64_t, int64_t, int64_t, const double*,
                                                          const double*, double*),
                                         uint64_t seed) {
  const int64_t outer = 2, C = 4, inner = 3, n = outer * C * inner;
  Random rng(seed);
  const std::vector<double> x = testing::to_double(testing::random_values(rng, n, -2, 2));
  const std::vector<double> dy = testing::to_double(testing::random_values(rng, n));
  std::vector<double> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  forward(outer, C, inner, x.data(), y.data());
  backward(outer, C, inner, y.data(), dy.data(), dx.data());
  expect_gradient(x, dx, [&](const std::vector<double>& at) {
    std::vector<double> out(static_cast<size_t>(n));
    forward(outer, C, inner, at.data(), out.data());
    double l = 0;
    for (int64_t i = 0; i < n; ++i) l += dy[size_t(i)] * out[size_t(i)];
    return l;
  });
}

TEST(SoftmaxRef, BackwardMatchesFiniteDifferences) {
  expect_backward_matches_differences(ref::softmax_forward<double>, ref::softmax_backward<double>,
                                      7);
}

TEST(SoftmaxFastRef, BackwardMatchesFiniteDifferences) {
  expect_backward_matches_differences(ref::softmax_fast_forward<double>,
                                      ref::softmax_backward<double>, 9);
}

TEST(LogSoftmaxRef, BackwardMatchesFiniteDifferences) {
  expect_backward_matches_differences(ref::log_softmax_forward<double>,
                                      ref::log_softmax_backward<double>, 17);
}

TEST(SoftmaxCrossEntropyRef, ByHand) {
  const std::vector<double> logits = {0, kLn2, kLn3, 0, kLn2, kLn3};  // [2, 3]
  const std::vector<double> labels = {2, 0};
  std::vector<double> prob(6, kNaN), dlogits(6, kNaN);
  int64_t count = -1;
  const SoftmaxLossOptions options;
  const double loss = ref::softmax_cross_entropy_forward(2, 3, 1, logits.data(), labels.data(),
                                                         options, prob.data(), &count);
  EXPECT_NEAR(loss, std::log(2.0) + std::log(6.0), 1e-14);  // -log(3/6) - log(1/6)
  EXPECT_EQ(count, 2);
  ref::softmax_cross_entropy_backward(2, 3, 1, prob.data(), labels.data(), options, 0.5,
                                      dlogits.data());
  expect_near(dlogits, {0.5 / 6, 1.0 / 6, 0.5 * (0.5 - 1), 0.5 * (1.0 / 6 - 1), 1.0 / 6, 0.25},
              1e-15);
}

TEST(SoftmaxCrossEntropyRef, IgnoreLabel) {
  const std::vector<double> logits = {0, kLn2, kLn3, 0, kLn2, kLn3};
  std::vector<double> prob(6), dlogits(6, kNaN);
  int64_t count = -1;
  SoftmaxLossOptions options;
  options.has_ignore_label = true;
  const std::vector<double> labels = {2, -1};
  double loss = ref::softmax_cross_entropy_forward(2, 3, 1, logits.data(), labels.data(), options,
                                                   prob.data(), &count);
  EXPECT_NEAR(loss, std::log(2.0), 1e-14);
  EXPECT_EQ(count, 1);
  ref::softmax_cross_entropy_backward(2, 3, 1, prob.data(), labels.data(), options, 1.0,
                                      dlogits.data());
  expect_near(dlogits, {1.0 / 6, 2.0 / 6, -0.5, 0, 0, 0}, 1e-15);
  // An ignore_label may also be a real class: here class 2.
  options.ignore_label = 2;
  const std::vector<double> labels2 = {2, 0};
  loss = ref::softmax_cross_entropy_forward(2, 3, 1, logits.data(), labels2.data(), options,
                                            prob.data(), &count);
  EXPECT_NEAR(loss, std::log(6.0), 1e-14);
  EXPECT_EQ(count, 1);
}

TEST(SoftmaxCrossEntropyCpu, UnderflowedProbabilityIsClampedToFltMin) {
  Context ctx;
  const Tensor logits = Tensor::from_vector({1, 2}, {0.0f, -200.0f});
  const Tensor labels = Tensor::from_vector({1}, {1.0f});
  Tensor prob({1, 2}), loss = testing::poisoned({});
  softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, {});
  EXPECT_EQ(prob.to_vector()[1], 0.0f);
  EXPECT_NEAR(loss.to_vector()[0], -std::log(double(FLT_MIN)), 1e-4);  // 87.34, not infinity
}

TEST(SoftmaxCrossEntropy, NormalizerByMode) {
  // outer 3, inner 4, 5 counted positions.
  EXPECT_EQ(loss_normalizer(LossNormalization::valid, 3, 4, 5), 5);
  EXPECT_EQ(loss_normalizer(LossNormalization::valid, 3, 4, 0), 1);  // at least 1
  EXPECT_EQ(loss_normalizer(LossNormalization::batch_size, 3, 4, 5), 3);
  EXPECT_EQ(loss_normalizer(LossNormalization::full, 3, 4, 5), 12);
  EXPECT_EQ(loss_normalizer(LossNormalization::none, 3, 4, 5), 1);
}

TEST(SoftmaxCrossEntropyRef, BackwardMatchesFiniteDifferences) {
  expect_loss_backward_matches_differences(0.0f, 8);
}

// float64 on the CPU runs the reference, normalized as float32 is: the Tensor-level gradient is
// top_grad times the central difference of the Tensor-level loss, under every normalization.
TEST(SoftmaxCrossEntropy, Float64RunsTheReferenceNormalized) {
  Context ctx;
  const Shape shape = {2, 4, 3};
  Random rng(9);
  const std::vector<double> logits = testing::to_double(testing::random_values(rng, 24, -2, 2));
  const Tensor labels = loss_testing::f64_tensor({2, 3}, {3, 0, -1, 1, 2, 3});  // one ignored
  const Tensor top_grad = loss_testing::f64_tensor({1}, {0.7});
  for (LossNormalization mode : loss_testing::kModes) {
    SCOPED_TRACE("normalization " + std::to_string(int(mode)));
    SoftmaxLossOptions options;
    options.has_ignore_label = true;
    options.normalization = mode;
    auto loss_at = [&](const std::vector<double>& at) {
      Tensor prob(shape, DType::f64), loss({1}, DType::f64);
      softmax_cross_entropy_forward(ctx, loss_testing::f64_tensor(shape, at), labels, prob, loss,
                                    options);
      return 0.7 * loss.data<double>()[0];
    };
    Tensor prob(shape, DType::f64), loss({1}, DType::f64), dlogits(shape, DType::f64);
    softmax_cross_entropy_forward(ctx, loss_testing::f64_tensor(shape, logits), labels, prob, loss,
                                  options);
    softmax_cross_entropy_backward(ctx, prob, labels, top_grad, options, dlogits);
    expect_gradient(
        logits, std::vector<double>(dlogits.data<double>(), dlogits.data<double>() + 24), loss_at);
  }
}

// The normalized loss and the top_grad-scaled gradient of the Tensor-level API against the
// reference's definition (a sum, a count, a scale), under every normalization.
TEST(SoftmaxCrossEntropyCpu, MatchesReference) {
  check_cpu_loss_against_reference(20, 0.0f);
}

TEST(SoftmaxCrossEntropyCpu, EveryPositionIgnored) {
  Context ctx;
  const Tensor logits = Tensor::from_vector({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  const Tensor labels = Tensor::from_vector({2}, {-1, -1});
  SoftmaxLossOptions options;
  options.has_ignore_label = true;
  Tensor prob({2, 3}), loss = testing::poisoned({1}), dlogits = testing::poisoned({2, 3});
  softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
  EXPECT_EQ(loss.to_vector()[0], 0.0f);  // normalizer max(0, 1): no division by zero
  softmax_cross_entropy_backward(ctx, prob, labels, Tensor::from_vector({}, {1.0f}), options,
                                 dlogits);
  EXPECT_EQ(dlogits.to_vector(), std::vector<float>(6, 0.0f));
}

std::string error_of(const Tensor& labels, const SoftmaxLossOptions& options) {
  Context ctx;
  const Tensor logits = Tensor::from_vector({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  Tensor prob({2, 3}), loss(Shape{});
  try {
    softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SoftmaxCrossEntropy, RejectsBadLabels) {
  const SoftmaxLossOptions plain;
  const std::string out_of_range = error_of(Tensor::from_vector({2}, {0, 3}), plain);
  EXPECT_NE(out_of_range.find("label 3 at position 1"), std::string::npos) << out_of_range;
  EXPECT_NE(out_of_range.find("[0, 3)"), std::string::npos) << out_of_range;
  EXPECT_NE(error_of(Tensor::from_vector({2}, {1.5f, 0}), plain).find("label 1.5 at position 0"),
            std::string::npos);
  EXPECT_NE(error_of(Tensor::from_vector({2}, {0, -1}), plain), "");
  EXPECT_NE(error_of(Tensor::from_vector({2}, {kNaN, 0}), plain), "");
  EXPECT_NE(error_of(Tensor::from_vector({3}, {0, 1, 2}), plain), "");  // one label too many
  SoftmaxLossOptions ignoring;
  ignoring.has_ignore_label = true;
  EXPECT_EQ(error_of(Tensor::from_vector({2}, {0, -1}), ignoring), "");
  EXPECT_NE(error_of(Tensor::from_vector({2}, {0, -2}), ignoring).find("ignore_label -1"),
            std::string::npos);
  SoftmaxLossOptions bad_axis;
  bad_axis.axis = 2;
  EXPECT_NE(error_of(Tensor::from_vector({2}, {0, 1}), bad_axis).find("axis 2"), std::string::npos);
  // The backward checks the labels too, and wants a one-element top_grad and loss.
  Context ctx;
  const Tensor prob = Tensor::from_vector({2, 3}, {0.1f, 0.2f, 0.7f, 0.3f, 0.3f, 0.4f});
  Tensor dlogits({2, 3});
  EXPECT_THROW(softmax_cross_entropy_backward(ctx, prob, Tensor::from_vector({2}, {0, 3}),
                                              Tensor::from_vector({1}, {1.0f}), plain, dlogits),
               Error);
  EXPECT_THROW(
      softmax_cross_entropy_backward(ctx, prob, Tensor::from_vector({2}, {0, 1}),
                                     Tensor::from_vector({2}, {1.0f, 1.0f}), plain, dlogits),
      Error);
  Tensor loss2({2});
  EXPECT_THROW(softmax_cross_entropy_forward(ctx, prob, Tensor::from_vector({2}, {0, 1}), dlogits,
                                             loss2, plain),
               Error);
}

}  // namespace
}  // namespace crema::kernels
