// Log-softmax and the label-smoothed softmax cross-entropy on the CPU: the references by hand and
// against central differences in double, the CPU path against ref<double> on awkward shapes and
// axes with poisoned outputs, in-place use (y over x, prob over logits), results that do not
// depend on the thread count, the missing FLT_MIN clamp with smoothing, and bad label_smoothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/softmax_test_util.h"

namespace crema::kernels {
namespace {

using testing::kNaN;
using namespace softmax_testing;

const double kLn2 = std::log(2.0), kLn3 = std::log(3.0);

TEST(LogSoftmaxRef, ByHand) {
  const std::vector<double> x = {0, kLn2, kLn3};  // softmax 1/6, 2/6, 3/6
  std::vector<double> y(3);
  ref::log_softmax_forward<double>(1, 3, 1, x.data(), y.data());
  EXPECT_NEAR(y[0], std::log(1 / 6.0), 1e-15);
  EXPECT_NEAR(y[1], std::log(2 / 6.0), 1e-15);
  EXPECT_NEAR(y[2], std::log(3 / 6.0), 1e-15);
  // Where the softmax underflows to 0, log-softmax stays exact.
  const std::vector<float> far = {0, -200};
  std::vector<float> yf(2);
  ref::log_softmax_forward<float>(1, 2, 1, far.data(), yf.data());
  EXPECT_EQ(yf[0], 0.0f);
  EXPECT_EQ(yf[1], -200.0f);
}

TEST(LogSoftmaxCpu, MatchesReferenceAndRunsInPlace) {
  check_cpu_against_reference({ref::log_softmax_forward<double>, ref::log_softmax_backward<double>,
                               log_softmax_forward, log_softmax_backward},
                              40, 8.0);
}

TEST(SoftmaxCrossEntropySmoothingRef, ByHand) {
  // prob = 1/6, 2/6, 3/6; label 2, eps 0.3: targets 0.1, 0.1, 0.8.
  const std::vector<double> logits = {0, kLn2, kLn3}, labels = {2};
  SoftmaxLossOptions options;
  options.label_smoothing = 0.3f;
  const double eps = double(0.3f);
  std::vector<double> prob(3), dlogits(3, kNaN);
  const double loss = ref::softmax_cross_entropy_forward(1, 3, 1, logits.data(), labels.data(),
                                                         options, prob.data(), nullptr);
  const double want = -(eps / 3) * (std::log(1 / 6.0) + std::log(2 / 6.0)) -
                      (1 - eps + eps / 3) * std::log(3 / 6.0);
  EXPECT_NEAR(loss, want, 1e-14);
  ref::softmax_cross_entropy_backward(1, 3, 1, prob.data(), labels.data(), options, 2.0,
                                      dlogits.data());
  EXPECT_NEAR(dlogits[0], 2 * (1 / 6.0 - eps / 3), 1e-15);
  EXPECT_NEAR(dlogits[1], 2 * (2 / 6.0 - eps / 3), 1e-15);
  EXPECT_NEAR(dlogits[2], 2 * (3 / 6.0 - 1 + eps - eps / 3), 1e-15);
}

TEST(SoftmaxCrossEntropySmoothingRef, BackwardMatchesFiniteDifferences) {
  expect_loss_backward_matches_differences(0.2f, 18);
}

TEST(SoftmaxCrossEntropySmoothingCpu, MatchesReference) {
  check_cpu_loss_against_reference(50, 0.1f);
}

TEST(SoftmaxCrossEntropySmoothingCpu, NoFltMinClamp) {
  // Class 1's probability underflows: Caffe's term clamps it to -log(FLT_MIN) = 87.3, the
  // smoothed term (PyTorch's) takes the exact log-softmax, about 200.
  Context ctx;
  const Tensor logits = Tensor::from_vector({1, 2}, {0.0f, -200.0f});
  const Tensor labels = Tensor::from_vector({1}, {1.0f});
  Tensor prob({1, 2}), loss(Shape{});
  SoftmaxLossOptions options;
  softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
  EXPECT_NEAR(loss.to_vector()[0], -std::log(double(FLT_MIN)), 1e-4);
  options.label_smoothing = 0.5f;  // targets 0.25, 0.75: 0.75 * 200 + 0.25 * 0
  softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
  EXPECT_NEAR(loss.to_vector()[0], 150.0, 1e-4);
}

TEST(SoftmaxCrossEntropySmoothing, RejectsOutOfRange) {
  Context ctx;
  const Tensor logits = Tensor::from_vector({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  const Tensor labels = Tensor::from_vector({2}, {0, 2});
  Tensor prob({2, 3}), loss(Shape{}), dlogits({2, 3});
  for (float eps : {1.0f, -0.25f, kNaN}) {
    SoftmaxLossOptions options;
    options.label_smoothing = eps;
    try {
      softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
      ADD_FAILURE() << "no error for label_smoothing " << eps;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("label_smoothing"), std::string::npos) << e.what();
    }
    EXPECT_THROW(softmax_cross_entropy_backward(ctx, prob, labels, Tensor::from_vector({1}, {1.0f}),
                                                options, dlogits),
                 Error);
  }
}

}  // namespace
}  // namespace crema::kernels
