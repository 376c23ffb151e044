// Accuracy on CUDA: against the reference's counts on tie-heavy random scores (one block, several
// blocks and the finishing block, inner > 1, N = 1), ignore_label, NaN scores, every position
// ignored, invalid labels giving NaN, bit-identical repeats, and the dispatch.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/accuracy/accuracy.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

// The accuracy of the CUDA kernel (raw interface) for scores [outer, C, inner].
float run_cuda(Context& ctx, int64_t outer, int64_t C, int64_t inner,
               const std::vector<float>& scores, const std::vector<float>& labels, int top_k,
               bool has_ignore_label, int ignore_label) {
  const Tensor s = testing::to_device(ctx, {outer, C, inner}, scores);
  const Tensor l = testing::to_device(ctx, {outer * inner}, labels);
  Tensor out = testing::poisoned_device(ctx, {});
  Tensor workspace = ctx.empty({int64_t(cuda::accuracy_workspace_bytes(outer * inner) / 4) + 1});
  cuda::accuracy(outer, C, inner, s.data<float>(), l.data<float>(), top_k, has_ignore_label,
                 ignore_label, out.data<float>(), workspace.data<float>(), ctx.stream());
  return host_values(ctx, out)[0];
}

TEST(AccuracyCuda, MatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(9);
  // {outer, C, inner}: LeNet's test batch; per-pixel scores over 20 blocks; a single position.
  for (const Shape& e : {Shape{100, 10, 1}, Shape{256, 10, 1}, Shape{4, 7, 1225}, Shape{1, 1, 1},
                         Shape{3, 1000, 1}}) {
    const int64_t outer = e[0], C = e[1], inner = e[2];
    std::vector<float> scores(size_t(outer * C * inner));
    for (float& s : scores) s = float(rng.below(4));  // many ties
    std::vector<float> labels(size_t(outer * inner));
    for (float& l : labels) l = rng.below(6) == 0 ? -1.0f : float(rng.below(uint64_t(C)));
    for (int top_k : {1, 3}) {
      if (top_k > C) continue;
      SCOPED_TRACE(shape_str(e) + " top " + std::to_string(top_k));
      const AccuracyCount want =
          ref::accuracy(outer, C, inner, scores.data(), labels.data(), top_k, true, -1);
      const float ratio =
          want.counted > 0 ? float(double(want.correct) / double(want.counted)) : 0.0f;
      const float got = run_cuda(ctx, outer, C, inner, scores, labels, top_k, true, -1);
      EXPECT_EQ(got, ratio);
      for (int repeat = 0; repeat < 2; ++repeat) {
        EXPECT_TRUE(testing::same_bits(
            {run_cuda(ctx, outer, C, inner, scores, labels, top_k, true, -1)}, {got}));
      }
    }
  }
}

TEST(AccuracyCuda, NaNScoresIgnoredAndInvalidLabels) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<float> scores = {kNaN, 0.1f, 0.2f,   // the label's own score is NaN
                                     0.9f, kNaN, 0.2f};  // another class is NaN
  EXPECT_EQ(run_cuda(ctx, 2, 3, 1, scores, {0, 0}, 1, false, -1), 0.0f);
  EXPECT_EQ(run_cuda(ctx, 2, 3, 1, scores, {0, 0}, 2, false, -1), 0.5f);
  // Every position ignored: 0.
  EXPECT_EQ(run_cuda(ctx, 2, 3, 1, scores, {7, 7}, 1, true, 7), 0.0f);
  // Invalid labels: NaN rather than an exception.
  const std::vector<float> clean = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f};
  for (float bad : {3.0f, -1.0f, 0.5f, kNaN}) {
    EXPECT_TRUE(std::isnan(run_cuda(ctx, 2, 3, 1, clean, {1, bad}, 1, false, -1))) << bad;
  }
  // Invalid labels among many positions (several blocks).
  std::vector<float> many_scores(3000 * 10, 0.5f), many_labels(3000, 1.0f);
  many_labels[2500] = 10.0f;
  EXPECT_TRUE(std::isnan(run_cuda(ctx, 3000, 10, 1, many_scores, many_labels, 1, false, -1)));
}

TEST(AccuracyCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  Random rng(21);
  const Tensor scores = testing::random_tensor(rng, {2, 5, 3, 3});
  std::vector<float> label_values(18);
  for (float& l : label_values) l = float(rng.below(5));
  const Tensor labels = Tensor::from_vector({2, 1, 3, 3}, label_values);
  AccuracyOptions options;
  options.top_k = 2;
  Tensor out_cpu(Shape{});
  accuracy(cpu_ctx, scores, labels, options, out_cpu);
  Tensor out = testing::poisoned_device(ctx, {1});
  accuracy(ctx, testing::to_device(ctx, scores), testing::to_device(ctx, labels), options, out);
  EXPECT_EQ(host_values(ctx, out), out_cpu.to_vector());
  Tensor host_out(Shape{});
  EXPECT_THROW(accuracy(ctx, testing::to_device(ctx, scores), testing::to_device(ctx, labels),
                        options, host_out),
               Error);
}

}  // namespace
}  // namespace crema::kernels
