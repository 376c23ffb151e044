// Log-softmax and the label-smoothed softmax cross-entropy on CUDA: every version against
// ref<double> on awkward shapes (thread and warp versions, one block and several, the backward's
// separate label count), every normalization, poisoned outputs, in-place use, bit-identical
// repeats, invalid labels giving NaN, and the dispatch against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/softmax_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

using namespace softmax_testing;

// The op's functions, for check_every_version.
struct LogSoftmaxOp {
  template <class... A>
  void ref_forward(A... a) const { ref::log_softmax_forward(a...); }
  template <class... A>
  void ref_backward(A... a) const { ref::log_softmax_backward(a...); }
  template <class... A>
  void forward(A... a) const { cuda::log_softmax_forward(a...); }
  template <class... A>
  void backward(A... a) const { cuda::log_softmax_backward(a...); }
};

TEST(LogSoftmaxCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_every_version(LogSoftmaxOp{}, 160, 8.0f);
}

TEST(LogSoftmaxCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  Random rng(3);
  for (const Case& c : {Case{{64, 10}, 1}, Case{{2, 21, 9, 7}, 1}, Case{{4, 6, 5}, -1}}) {
    SCOPED_TRACE(describe(c));
    const Tensor x = testing::random_tensor(rng, c.shape, -6, 6);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    Tensor y_cpu(c.shape), dx_cpu(c.shape);
    log_softmax_forward(cpu, x, y_cpu, c.axis);
    log_softmax_backward(cpu, y_cpu, dy, dx_cpu, c.axis);
    const Tensor xg = testing::to_device(gpu, x), dyg = testing::to_device(gpu, dy);
    Tensor y = testing::poisoned_device(gpu, c.shape), dx = testing::poisoned_device(gpu, c.shape);
    log_softmax_forward(gpu, xg, y, c.axis);
    log_softmax_backward(gpu, y, dyg, dx, c.axis);
    EXPECT_LT(testing::rel_error(host_values(gpu, y), testing::to_double(y_cpu)), 1e-6);
    EXPECT_LT(testing::rel_error(host_values(gpu, dx), testing::to_double(dx_cpu)), 1e-5);
  }
}

std::vector<float> random_labels(Random& rng, const Extents& e) {
  std::vector<float> labels(size_t(e.outer * e.inner));
  for (float& l : labels) l = rng.below(5) == 0 ? 255.0f : float(rng.below(uint64_t(e.C)));
  return labels;
}

SoftmaxLossOptions smoothed(const Case& c, LossNormalization mode) {
  SoftmaxLossOptions options;
  options.axis = c.axis;
  options.has_ignore_label = true;
  options.ignore_label = 255;
  options.normalization = mode;
  options.label_smoothing = 0.2f;
  return options;
}

TEST(SoftmaxCrossEntropySmoothingCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 180;
  for (const Case& c : cases()) {
    const Extents e = extents(c);
    Random rng(++seed);
    const Tensor logits = testing::random_tensor(rng, c.shape, -5, 5);
    const std::vector<float> label_values = random_labels(rng, e);
    const std::vector<double> xd = testing::to_double(logits);
    const std::vector<double> ld = testing::to_double(label_values);
    const Tensor logits_g = testing::to_device(ctx, logits);
    const Tensor labels_g = testing::to_device(ctx, {e.outer * e.inner}, label_values);
    const Tensor top_grad = testing::to_device(ctx, {1}, {0.7f});
    for (LossNormalization mode : kModes) {
      const SoftmaxLossOptions options = smoothed(c, mode);
      std::vector<double> prob_ref(xd.size()), dlogits_ref(xd.size());
      int64_t counted = 0;
      const double sum = ref::softmax_cross_entropy_forward(
          e.outer, e.C, e.inner, xd.data(), ld.data(), options, prob_ref.data(), &counted);
      const double normalizer = double(loss_normalizer(mode, e.outer, e.inner, counted));
      ref::softmax_cross_entropy_backward(e.outer, e.C, e.inner, prob_ref.data(), ld.data(),
                                          options, double(0.7f) / normalizer, dlogits_ref.data());
      const double loss_ref = sum / normalizer;
      for (cuda::SoftmaxVersion version : kVersions) {
        SCOPED_TRACE(describe(c) + " normalization " + std::to_string(int(mode)) + " version " +
                     std::to_string(int(version)));
        const LossRun r = run_loss(ctx, e, c.shape, logits_g, labels_g, top_grad, options, version);
        EXPECT_NEAR(r.loss[0], loss_ref, 1e-5 * std::max(1.0, std::abs(loss_ref)));
        EXPECT_LT(testing::rel_error(r.prob, prob_ref), 1e-5);
        EXPECT_LT(testing::rel_error(r.dlogits, dlogits_ref), 1e-5);
        const LossRun aliased =
            run_loss(ctx, e, c.shape, logits_g, labels_g, top_grad, options, version, true);
        EXPECT_TRUE(testing::same_bits(aliased.loss, r.loss));
        EXPECT_TRUE(testing::same_bits(aliased.prob, r.prob));
      }
    }
  }
}

TEST(SoftmaxCrossEntropySmoothingCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Case& c : {Case{{256, 10}, 1}, Case{{3, 5, 40, 40}, 1}, Case{{64, 1000}, 1}}) {
    SCOPED_TRACE(describe(c));
    const Extents e = extents(c);
    Random rng(7);
    const Tensor logits = testing::to_device(ctx, testing::random_tensor(rng, c.shape, -5, 5));
    const Tensor labels = testing::to_device(ctx, {e.outer * e.inner}, random_labels(rng, e));
    const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
    const SoftmaxLossOptions options = smoothed(c, LossNormalization::valid);
    const LossRun first =
        run_loss(ctx, e, c.shape, logits, labels, top_grad, options, cuda::SoftmaxVersion::best);
    for (int repeat = 0; repeat < 3; ++repeat) {
      const LossRun again =
          run_loss(ctx, e, c.shape, logits, labels, top_grad, options, cuda::SoftmaxVersion::best);
      EXPECT_TRUE(testing::same_bits(again.loss, first.loss));
      EXPECT_TRUE(testing::same_bits(again.prob, first.prob));
      EXPECT_TRUE(testing::same_bits(again.dlogits, first.dlogits));
    }
  }
}

TEST(SoftmaxCrossEntropySmoothingCuda, InvalidLabelGivesNaNLoss) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Case& c : {Case{{64, 10}, 1}, Case{{64, 100}, 1}, Case{{3, 5, 40, 40}, 1}}) {
    const Extents e = extents(c);
    Random rng(11);
    const Tensor logits = testing::to_device(ctx, testing::random_tensor(rng, c.shape, -5, 5));
    const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
    for (float bad : {float(e.C), -2.0f, 1.5f, kNaN}) {
      std::vector<float> label_values = random_labels(rng, e);
      label_values[size_t(e.outer * e.inner / 2 + 1)] = bad;
      const Tensor labels = testing::to_device(ctx, {e.outer * e.inner}, label_values);
      for (cuda::SoftmaxVersion version : kVersions) {
        SCOPED_TRACE(describe(c) + " label " + std::to_string(bad) + " version " +
                     std::to_string(int(version)));
        const LossRun r = run_loss(ctx, e, c.shape, logits, labels, top_grad,
                                   smoothed(c, LossNormalization::valid), version);
        EXPECT_TRUE(std::isnan(r.loss[0]));
        EXPECT_EQ(testing::count_nan(r.dlogits), e.C);
        EXPECT_EQ(testing::count_nan(r.prob), 0);
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
