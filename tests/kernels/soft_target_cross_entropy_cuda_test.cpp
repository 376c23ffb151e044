// Soft-target cross-entropy on CUDA against ref<double>: the thread and warp walks, one block and
// several (the finishing block), inner > 1, label smoothing, every normalization, poisoned
// outputs, prob aliasing the logits, repeats bit for bit; Accuracy's target_labels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/accuracy/accuracy.h"
#include "kernels/loss/soft_target_cross_entropy.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

struct Case {
  Shape shape;
  float eps;
  LossNormalization normalization;
};

// The reference in double: the loss (normalized) and dlogits for top_grad `g`.
struct Expected {
  double loss;
  std::vector<double> dlogits;
};

Expected reference(const Case& c, const std::vector<float>& x, const std::vector<float>& t,
                   double g) {
  const int64_t outer = c.shape[0], C = c.shape[1];
  const int64_t inner = shape_count(c.shape, 2, int(c.shape.size()));
  SoftmaxLossOptions options;
  options.label_smoothing = c.eps;
  const std::vector<double> xd(x.begin(), x.end()), td(t.begin(), t.end());
  std::vector<double> prob(xd.size()), d(xd.size());
  const double normalizer = double(loss_normalizer(c.normalization, outer, inner, outer * inner));
  const double sum = ref::soft_target_cross_entropy_forward(outer, C, inner, xd.data(), td.data(),
                                                            options, prob.data());
  ref::soft_target_cross_entropy_backward(outer, C, inner, prob.data(), td.data(), options,
                                          g / normalizer, d.data());
  return {sum / normalizer, d};
}

// Thread walk ([64, 10]: C <= 16), warp walk ([7, 1000], [1, 33]), inner > 1 (thread walk,
// coalesced), and more positions than one block (and than 1024 blocks: the grid-stride loop and
// the finishing block). float32 against float64: 1e-5 relative.
TEST(SoftTargetCrossEntropyCuda, MatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  const std::vector<Case> cases = {
      {{64, 10}, 0.0f, LossNormalization::valid},
      {{7, 1000}, 0.1f, LossNormalization::valid},
      {{1, 33}, 0.0f, LossNormalization::none},
      {{3, 5, 33, 7}, 0.2f, LossNormalization::batch_size},
      {{300000, 3}, 0.0f, LossNormalization::full},
      {{9000, 40}, 0.05f, LossNormalization::valid},
  };
  Random rng(21);
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " eps " + std::to_string(c.eps));
    const int64_t n = shape_numel(c.shape);
    const std::vector<float> x = testing::random_values(rng, n, -6, 6);
    const std::vector<float> t = testing::random_values(rng, n, 0, 1);  // not summing to 1
    const Expected want = reference(c, x, t, 0.5);
    SoftmaxLossOptions options;
    options.label_smoothing = c.eps;
    options.normalization = c.normalization;
    const Tensor logits = testing::to_device(gpu, c.shape, x);
    const Tensor targets = testing::to_device(gpu, c.shape, t);
    const Tensor top_grad = testing::to_device(gpu, {1}, {0.5f});
    Tensor prob = testing::poisoned_device(gpu, c.shape);
    Tensor loss = testing::poisoned_device(gpu, {1});
    Tensor dlogits = testing::poisoned_device(gpu, c.shape);
    soft_target_cross_entropy_forward(gpu, logits, targets, prob, loss, options);
    soft_target_cross_entropy_backward(gpu, prob, targets, top_grad, options, dlogits);
    const float got = host_values(gpu, loss)[0];
    EXPECT_NEAR(got, want.loss, 1e-5 * std::abs(want.loss));
    EXPECT_LT(testing::rel_error(host_values(gpu, dlogits), want.dlogits), 1e-5);

    // The same bits again; and in place (prob aliasing the logits) the same result.
    Tensor loss2 = testing::poisoned_device(gpu, {1});
    soft_target_cross_entropy_forward(gpu, logits, targets, prob, loss2, options);
    EXPECT_TRUE(testing::same_bits(host_values(gpu, loss2), host_values(gpu, loss)));
    Tensor in_place = testing::to_device(gpu, c.shape, x);
    soft_target_cross_entropy_forward(gpu, in_place, targets, in_place, loss2, options);
    EXPECT_TRUE(testing::same_bits(host_values(gpu, in_place), host_values(gpu, prob)));
    EXPECT_TRUE(testing::same_bits(host_values(gpu, loss2), host_values(gpu, loss)));
  }
}

TEST(TargetLabelsCuda, MatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  Random rng(4);
  for (const Shape& shape : std::vector<Shape>{{64, 10}, {3, 7, 300}, {1, 1000}}) {
    SCOPED_TRACE(shape_str(shape));
    std::vector<float> t = testing::random_values(rng, shape_numel(shape), 0, 1);
    for (size_t k = 0; k < t.size(); k += 3) t[k] = 0.5f;  // ties: the first class wins
    const int64_t positions = shape_numel(shape) / shape[1];
    const int64_t inner = positions / shape[0];
    std::vector<float> want(static_cast<size_t>(positions));
    ref::target_labels(shape[0], shape[1], inner, t.data(), want.data());
    Tensor labels = testing::poisoned_device(gpu, {positions});
    target_labels(gpu, testing::to_device(gpu, shape, t), 1, labels);
    EXPECT_EQ(host_values(gpu, labels), want);
  }
}

}  // namespace
}  // namespace crema::kernels
