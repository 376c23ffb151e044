// Log-softmax's dispatch against the CPU, and the label-smoothed softmax cross-entropy on CUDA:
// every version against ref<double> on awkward shapes (thread and warp versions, one block and
// several, the backward's separate label count), every normalization, poisoned outputs, in-place
// use (every log-softmax version, bit-identical repeats and invalid labels: softmax_cuda_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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
      const SoftmaxLossOptions options = loss_options(c, mode, 0.2f);
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

}  // namespace
}  // namespace crema::kernels
