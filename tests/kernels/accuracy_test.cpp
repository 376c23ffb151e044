// Accuracy: top-1 and top-3 by hand with ties (as in Caffe, a tie counts against the label), NaN
// scores, ignore_label, an axis with inner > 1, the CPU path against the reference (counts, and
// the Tensor-level ratio), and the errors.
#include "kernels/accuracy/accuracy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

using testing::kNaN;

// The Tensor-level accuracy (correct / counted, in a one-element tensor).
float run(const Shape& shape, const std::vector<float>& scores, const std::vector<float>& labels,
          int top_k, int axis = 1, bool has_ignore_label = false, int ignore_label = -1) {
  Context ctx;
  Tensor out = testing::poisoned({});
  accuracy(ctx, Tensor::from_vector(shape, scores),
           Tensor::from_vector({int64_t(labels.size())}, labels),
           AccuracyOptions{top_k, axis, has_ignore_label, ignore_label}, out);
  return out.to_vector()[0];
}

TEST(AccuracyRef, TopOneByHand) {
  const std::vector<double> scores = {0.1, 0.7, 0.2,   // argmax 1
                                      0.5, 0.3, 0.2,   // argmax 0
                                      0.2, 0.3, 0.9,   // argmax 2
                                      0.4, 0.4, 0.1};  // 0 and 1 tie
  const std::vector<double> labels = {1, 2, 2, 0};
  const AccuracyCount count = ref::accuracy(4, 3, 1, scores.data(), labels.data(), 1, false, -1);
  EXPECT_EQ(count.correct, 2);  // rows 0 and 2 (the tie in row 3 counts against label 0)
  EXPECT_EQ(count.counted, 4);
}

TEST(Accuracy, TopThreeWithTies) {
  // Classes 1, 2 and 4 tie at 0.5.
  const std::vector<float> row = {0.1f, 0.5f, 0.5f, 0.3f, 0.5f};
  std::vector<float> scores;
  for (int i = 0; i < 3; ++i) scores.insert(scores.end(), row.begin(), row.end());
  // Label 1: two other classes tie with it, so it needs top 3. Label 3: three classes score
  // higher (top 4 needed). Label 0: four do (top 5).
  const std::vector<float> labels = {1, 3, 0};
  EXPECT_EQ(run({3, 5}, scores, labels, 1), 0.0f);
  EXPECT_EQ(run({3, 5}, scores, labels, 2), 0.0f);
  EXPECT_EQ(run({3, 5}, scores, labels, 3), 1.0f / 3);
  EXPECT_EQ(run({3, 5}, scores, labels, 4), 2.0f / 3);
  EXPECT_EQ(run({3, 5}, scores, labels, 5), 1.0f);
  // All scores equal (a dead network): no label is ahead, so none is right at top 1.
  EXPECT_EQ(run({2, 4}, std::vector<float>(8, 0.25f), {0, 3}, 1), 0.0f);
  EXPECT_EQ(run({2, 4}, std::vector<float>(8, 0.25f), {0, 3}, 4), 1.0f);
}

TEST(Accuracy, NaNScoresCountAsWrong) {
  const std::vector<float> scores = {kNaN, 0.1f, 0.2f,   // the label's own score is NaN
                                     0.9f, kNaN, 0.2f};  // another class is NaN
  EXPECT_EQ(run({2, 3}, scores, {0, 0}, 1), 0.0f);
  EXPECT_EQ(run({2, 3}, scores, {0, 0}, 2), 0.5f);
}

TEST(Accuracy, IgnoreLabelAndInnerPositions) {
  // [N=1, C=3, 2 positions] along axis 1: position 0 scores (0.1, 0.8, 0.1), position 1 scores
  // (0.6, 0.3, 0.1).
  const std::vector<float> scores = {0.1f, 0.6f, 0.8f, 0.3f, 0.1f, 0.1f};
  EXPECT_EQ(run({1, 3, 2}, scores, {1, 1}, 1), 0.5f);
  EXPECT_EQ(run({1, 3, 2}, scores, {1, 1}, 2, 1), 1.0f);
  // Position 0 ignored; position 1 (label 1, top 1) is wrong.
  EXPECT_EQ(run({1, 3, 2}, scores, {7, 1}, 1, 1, true, 7), 0.0f);
  EXPECT_EQ(run({1, 3, 2}, scores, {7, 0}, 1, 1, true, 7), 1.0f);
  // Every position ignored: nothing counted, the accuracy is 0.
  EXPECT_EQ(run({1, 3, 2}, scores, {7, 7}, 1, 1, true, 7), 0.0f);
  // The same positions laid out [2, 3] along the last axis.
  EXPECT_EQ(run({2, 3}, {0.1f, 0.8f, 0.1f, 0.6f, 0.3f, 0.1f}, {1, 1}, 1, -1), 0.5f);
}

TEST(AccuracyCpu, MatchesReference) {
  Random rng(9);
  for (const Shape& shape : {Shape{100, 10}, Shape{4, 7, 35, 35}, Shape{1, 1}}) {
    const int64_t C = shape[1], positions = shape_numel(shape) / C;
    std::vector<float> scores(static_cast<size_t>(shape_numel(shape)));
    for (float& s : scores) s = float(rng.below(4));  // many ties
    std::vector<float> labels(static_cast<size_t>(positions));
    for (float& l : labels) l = rng.below(6) == 0 ? -1.0f : float(rng.below(uint64_t(C)));
    for (int top_k : {1, 3}) {
      if (top_k > C) continue;
      const int64_t outer = shape[0], inner = positions / shape[0];
      const AccuracyCount got =
          cpu::accuracy(outer, C, inner, scores.data(), labels.data(), top_k, true, -1, 2);
      const AccuracyCount want =
          ref::accuracy(outer, C, inner, scores.data(), labels.data(), top_k, true, -1);
      EXPECT_EQ(got.correct, want.correct) << shape_str(shape) << " top " << top_k;
      EXPECT_EQ(got.counted, want.counted);
      if (want.counted > 0) {
        EXPECT_GT(want.correct, 0);
      }
      const float ratio =
          want.counted > 0 ? float(double(want.correct) / double(want.counted)) : 0.0f;
      EXPECT_EQ(run(shape, scores, labels, top_k, 1, true, -1), ratio);
    }
  }
}

TEST(Accuracy, RejectsBadArguments) {
  const std::vector<float> scores = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  try {
    run({2, 3}, scores, {0, 3}, 1);
    ADD_FAILURE() << "label 3 of 3 classes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 at position 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run({2, 3}, scores, {0, 0.5f}, 1), Error);
  EXPECT_THROW(run({2, 3}, scores, {0, 1}, 0), Error);
  EXPECT_THROW(run({2, 3}, scores, {0, 1}, 4), Error);
  EXPECT_THROW(run({2, 3}, scores, {0, 1, 2}, 1), Error);
  EXPECT_THROW(run({2, 3}, scores, {0, 1}, 1, 2), Error);
  Context ctx;
  Tensor two({2});
  EXPECT_THROW(accuracy(ctx, Tensor::from_vector({2, 3}, scores), Tensor::from_vector({2}, {0, 1}),
                        AccuracyOptions{}, two),
               Error);  // out must have one element
}

}  // namespace
}  // namespace crema::kernels
