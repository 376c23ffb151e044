// Softmax, log-softmax and softmax cross-entropy on CUDA: every version against ref<double> on
// awkward shapes (N = 1, odd class counts, inner > 1, LeNet's logits, wide rows, shapes that need
// several blocks and the finishing block, and the backward's separate label count), every
// normalization, the ignore_label, poisoned outputs, in-place use, bit-identical repeats, invalid
// labels giving a NaN loss, and the dispatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/softmax_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

using namespace softmax_testing;

TEST(SoftmaxCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_every_version({ref::softmax_forward<double>, ref::softmax_backward<double>,
                       cuda::softmax_forward, cuda::softmax_backward},
                      60, 5.0f);
}

TEST(SoftmaxFastCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_every_version({ref::softmax_fast_forward<double>, ref::softmax_backward<double>,
                       cuda::softmax_fast_forward, cuda::softmax_backward},
                      61, 5.0f);
}

TEST(LogSoftmaxCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_every_version({ref::log_softmax_forward<double>, ref::log_softmax_backward<double>,
                       cuda::log_softmax_forward, cuda::log_softmax_backward},
                      160, 8.0f);
}

TEST(SoftmaxCrossEntropyCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_loss_every_version(80, 0.0f);
}

TEST(SoftmaxCrossEntropyCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // LeNet's logits (one block) and a per-pixel case (block partials, a finishing block, and the
  // backward's label count).
  for (const Case& c : {Case{{256, 10}, 1}, Case{{3, 5, 40, 40}, 1}, Case{{64, 1000}, 1}})
    for (float smoothing : {0.0f, 0.2f}) {
      SCOPED_TRACE(describe(c) + " label smoothing " + std::to_string(smoothing));
      const Extents e = extents(c);
      Random rng(7);
      const Tensor logits = testing::to_device(ctx, testing::random_tensor(rng, c.shape, -5, 5));
      const Tensor labels = testing::to_device(ctx, {e.outer * e.inner}, random_labels(rng, e));
      const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
      const SoftmaxLossOptions options = loss_options(c, LossNormalization::valid, smoothing);
      const LossRun first =
          run_loss(ctx, e, c.shape, logits, labels, top_grad, options, cuda::SoftmaxVersion::best);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const LossRun again = run_loss(ctx, e, c.shape, logits, labels, top_grad, options,
                                       cuda::SoftmaxVersion::best);
        EXPECT_TRUE(testing::same_bits(again.loss, first.loss));
        EXPECT_TRUE(testing::same_bits(again.prob, first.prob));
        EXPECT_TRUE(testing::same_bits(again.dlogits, first.dlogits));
      }
    }
}

TEST(SoftmaxCrossEntropyCuda, InvalidLabelGivesNaNLoss) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const Case& c : {Case{{64, 10}, 1}, Case{{64, 100}, 1}, Case{{3, 5, 40, 40}, 1}}) {
    const Extents e = extents(c);
    Random rng(11);
    const Tensor logits = testing::to_device(ctx, testing::random_tensor(rng, c.shape, -5, 5));
    const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
    for (float bad : {float(e.C), -2.0f, 1.5f, kNaN}) {
      std::vector<float> label_values = random_labels(rng, e);
      const int64_t at = e.outer * e.inner / 2 + 1;
      label_values[size_t(at)] = bad;
      const Tensor labels = testing::to_device(ctx, {e.outer * e.inner}, label_values);
      for (cuda::SoftmaxVersion version : kVersions)
        for (float smoothing : {0.0f, 0.2f}) {
          SCOPED_TRACE(describe(c) + " label " + std::to_string(bad) + " version " +
                       std::to_string(int(version)) + " label smoothing " +
                       std::to_string(smoothing));
          const LossRun r = run_loss(ctx, e, c.shape, logits, labels, top_grad,
                                     loss_options(c, LossNormalization::valid, smoothing), version);
          EXPECT_TRUE(std::isnan(r.loss[0]));
          // dlogits: NaN at the bad position's C entries, finite everywhere else.
          EXPECT_EQ(testing::count_nan(r.dlogits), e.C);
          EXPECT_EQ(testing::count_nan(r.prob), 0);
        }
    }
  }
}

TEST(SoftmaxCrossEntropyCuda, EveryPositionIgnored) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case c{{5, 7}, 1};
  const Extents e = extents(c);
  Random rng(13);
  const Tensor logits = testing::to_device(ctx, testing::random_tensor(rng, c.shape));
  const Tensor labels = testing::to_device(ctx, {5}, std::vector<float>(5, 255.0f));
  const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
  for (cuda::SoftmaxVersion version : kVersions) {
    const LossRun r = run_loss(ctx, e, c.shape, logits, labels, top_grad,
                               loss_options(c, LossNormalization::valid), version);
    EXPECT_EQ(r.loss[0], 0.0f);
    EXPECT_EQ(r.dlogits, std::vector<float>(35, 0.0f));
  }
}

TEST(SoftmaxCrossEntropyCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  for (int64_t batch : {64, 256}) {  // LeNet
    Random rng(static_cast<uint64_t>(batch));
    const Tensor logits = testing::random_tensor(rng, {batch, 10}, -3, 3);
    std::vector<float> label_values(static_cast<size_t>(batch));
    for (float& l : label_values) l = float(rng.below(10));
    const Tensor labels = Tensor::from_vector({batch}, label_values);
    const Tensor top_grad = Tensor::from_vector({}, {1.0f});
    SoftmaxLossOptions options;
    Tensor prob_cpu({batch, 10}), loss_cpu(Shape{}), dlogits_cpu({batch, 10});
    softmax_cross_entropy_forward(cpu_ctx, logits, labels, prob_cpu, loss_cpu, options);
    softmax_cross_entropy_backward(cpu_ctx, prob_cpu, labels, top_grad, options, dlogits_cpu);

    const Tensor logits_g = testing::to_device(ctx, logits),
                 labels_g = testing::to_device(ctx, labels);
    const Tensor top_grad_g = testing::to_device(ctx, top_grad);
    Tensor prob = testing::poisoned_device(ctx, {batch, 10});
    Tensor dlogits = testing::poisoned_device(ctx, {batch, 10});
    Tensor loss = testing::poisoned_device(ctx, {});
    softmax_cross_entropy_forward(ctx, logits_g, labels_g, prob, loss, options);
    softmax_cross_entropy_backward(ctx, prob, labels_g, top_grad_g, options, dlogits);
    EXPECT_NEAR(host_values(ctx, loss)[0], loss_cpu.to_vector()[0], 1e-5);
    EXPECT_LT(testing::rel_error(host_values(ctx, prob), testing::to_double(prob_cpu)), 1e-6);
    EXPECT_LT(testing::rel_error(host_values(ctx, dlogits), testing::to_double(dlogits_cpu)), 1e-6);

    Tensor host_loss(Shape{});
    EXPECT_THROW(softmax_cross_entropy_forward(ctx, logits_g, labels_g, prob, host_loss, options),
                 Error);
    EXPECT_THROW(softmax_cross_entropy_backward(ctx, prob, labels, top_grad_g, options, dlogits),
                 Error);  // host labels
  }
}

}  // namespace
}  // namespace crema::kernels
