// Shared by the softmax tests (CPU and CUDA; softmax, log-softmax and the cross-entropy): the
// cases, their [outer, C, inner] extents, labels and loss options, what ref<double> says the
// normalized cross-entropy is, and the checks of the CPU paths against it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/support/numeric_gradient.h"

namespace crema::kernels::softmax_testing {

struct Case {
  Shape shape;
  int axis;
};

struct Extents {
  int64_t outer, C, inner;
};

// The tests' own arithmetic, independent of the dispatch's.
inline Extents extents(const Case& c) {
  const int a = c.axis < 0 ? c.axis + int(c.shape.size()) : c.axis;
  return {shape_count(c.shape, 0, a), c.shape[size_t(a)],
          shape_count(c.shape, a + 1, int(c.shape.size()))};
}

inline std::string describe(const Case& c) {
  return shape_str(c.shape) + " axis " + std::to_string(c.axis);
}

// For the CPU: rows, per-pixel maps (more than one 256-position block), other axes, N = 1, C = 1.
inline const std::vector<Case>& cpu_cases() {
  static const std::vector<Case> cases = {
      {{1, 1}, 1},     {{1, 10}, 1},         {{7, 13}, -1}, {{3, 5, 4, 7}, 1}, {{2, 3, 300}, 1},
      {{64, 1000}, 1}, {{2, 21, 20, 20}, 1}, {{5, 3}, 0},   {{2, 3, 4}, 2},
  };
  return cases;
}

// The Tensor-level functions of a softmax-like op (softmax or log-softmax) and its reference.
struct CpuSoftmaxOp {
  void (*ref_forward)(int64_t outer, int64_t C, int64_t inner, const double* x, double* y);
  void (*ref_backward)(int64_t outer, int64_t C, int64_t inner, const double* y, const double* dy,
                       double* dx);
  void (*forward)(Context& ctx, const Tensor& x, Tensor& y, int axis);
  void (*backward)(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx, int axis);
};

// The CPU path of `op` against ref<double> on every CPU case, outputs poisoned first, on two
// threads; then in place (y over x, dx over dy): the same bits. Inputs uniform in
// [-range, range).
inline void check_cpu_against_reference(const CpuSoftmaxOp& op, uint64_t seed, double range) {
  for (const Case& c : cpu_cases()) {
    SCOPED_TRACE(describe(c));
    const Extents e = extents(c);
    Context ctx(Device::cpu(), 1, 2);
    Random rng(++seed);
    const Tensor x = testing::random_tensor(rng, c.shape, -range, range);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    Tensor y = testing::poisoned(c.shape), dx = testing::poisoned(c.shape);
    op.forward(ctx, x, y, c.axis);
    op.backward(ctx, y, dy, dx, c.axis);
    const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
    std::vector<double> y_ref(xd.size()), dx_ref(xd.size());
    op.ref_forward(e.outer, e.C, e.inner, xd.data(), y_ref.data());
    op.ref_backward(e.outer, e.C, e.inner, y_ref.data(), dyd.data(), dx_ref.data());
    EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-6);
    EXPECT_LT(testing::rel_error(dx.to_vector(), dx_ref), 1e-5);
    Tensor t = x.clone(), g = dy.clone();
    op.forward(ctx, t, t, c.axis);
    op.backward(ctx, t, g, g, c.axis);
    EXPECT_EQ(t.to_vector(), y.to_vector());
    EXPECT_EQ(g.to_vector(), dx.to_vector());
  }
}

// Labels in [0, C), one in five the ignore_label 255.
inline std::vector<float> random_labels(Random& rng, const Extents& e) {
  std::vector<float> labels(static_cast<size_t>(e.outer * e.inner));
  for (float& l : labels) l = rng.below(5) == 0 ? 255.0f : float(rng.below(uint64_t(e.C)));
  return labels;
}

inline SoftmaxLossOptions loss_options(const Case& c, LossNormalization mode,
                                       float label_smoothing = 0.0f) {
  SoftmaxLossOptions options;
  options.axis = c.axis;
  options.has_ignore_label = true;
  options.ignore_label = 255;
  options.normalization = mode;
  options.label_smoothing = label_smoothing;
  return options;
}

struct LossExpected {
  double loss;  // the sum over counted positions / normalizer
  std::vector<double> prob, dlogits;
};

// ref<double>'s cross-entropy, normalized as the Tensor-level API is (top_grad / normalizer).
inline LossExpected loss_expected(const Extents& e, const std::vector<double>& logits,
                                  const std::vector<double>& labels,
                                  const SoftmaxLossOptions& options, double top_grad) {
  LossExpected want{0.0, std::vector<double>(logits.size()), std::vector<double>(logits.size())};
  int64_t counted = -1;
  const double sum = ref::softmax_cross_entropy_forward(
      e.outer, e.C, e.inner, logits.data(), labels.data(), options, want.prob.data(), &counted);
  const double normalizer =
      double(loss_normalizer(options.normalization, e.outer, e.inner, counted));
  ref::softmax_cross_entropy_backward(e.outer, e.C, e.inner, want.prob.data(), labels.data(),
                                      options, top_grad / normalizer, want.dlogits.data());
  want.loss = sum / normalizer;
  return want;
}

// ref's cross-entropy backward (label smoothing eps, an ignored position) against central
// differences of top_grad times its forward, top_grad = 0.7.
inline void expect_loss_backward_matches_differences(float label_smoothing, uint64_t seed) {
  const int64_t outer = 2, C = 4, inner = 3, n = outer * C * inner;
  Random rng(seed);
  const std::vector<double> logits = testing::to_double(testing::random_values(rng, n, -2, 2));
  const std::vector<double> labels = {3, 0, -1, 1, 2, 3};  // position 2 ignored
  SoftmaxLossOptions options;
  options.has_ignore_label = true;
  options.label_smoothing = label_smoothing;
  std::vector<double> prob(static_cast<size_t>(n)), dlogits(size_t(n), testing::kNaN);
  ref::softmax_cross_entropy_forward(outer, C, inner, logits.data(), labels.data(), options,
                                     prob.data(), nullptr);
  ref::softmax_cross_entropy_backward(outer, C, inner, prob.data(), labels.data(), options, 0.7,
                                      dlogits.data());
  crema::testing::expect_gradient(logits, dlogits, [&](const std::vector<double>& at) {
    std::vector<double> p(static_cast<size_t>(n));
    return 0.7 * ref::softmax_cross_entropy_forward(outer, C, inner, at.data(), labels.data(),
                                                    options, p.data(), nullptr);
  });
}

// The CPU cross-entropy (label smoothing eps) against ref<double> on every CPU case and
// normalization, outputs poisoned first, on 1 and 2 threads (the same loss bits), and with prob
// written over the logits (the same loss and probabilities).
inline void check_cpu_loss_against_reference(uint64_t seed, float label_smoothing) {
  for (const Case& c : cpu_cases()) {
    const Extents e = extents(c);
    Random rng(++seed);
    const Tensor logits = testing::random_tensor(rng, c.shape, -5, 5);
    const std::vector<float> label_values = random_labels(rng, e);
    const Tensor labels = Tensor::from_vector({e.outer * e.inner}, label_values);
    const Tensor top_grad = Tensor::from_vector({1}, {0.25f});
    const std::vector<double> xd = testing::to_double(logits);
    const std::vector<double> ld = testing::to_double(label_values);
    for (LossNormalization mode : loss_testing::kModes) {
      SCOPED_TRACE(describe(c) + " normalization " + std::to_string(int(mode)));
      const SoftmaxLossOptions options = loss_options(c, mode, label_smoothing);
      const LossExpected want = loss_expected(e, xd, ld, options, 0.25);
      std::vector<std::vector<float>> losses;
      for (int threads : {1, 2}) {
        Context ctx(Device::cpu(), 1, threads);
        Tensor prob = testing::poisoned(c.shape), dlogits = testing::poisoned(c.shape);
        Tensor loss = testing::poisoned({});
        softmax_cross_entropy_forward(ctx, logits, labels, prob, loss, options);
        softmax_cross_entropy_backward(ctx, prob, labels, top_grad, options, dlogits);
        EXPECT_NEAR(loss.to_vector()[0], want.loss, 1e-6 * std::max(1.0, std::abs(want.loss)));
        EXPECT_LT(testing::rel_error(prob.to_vector(), want.prob), 1e-6);
        EXPECT_LT(testing::rel_error(dlogits.to_vector(), want.dlogits), 1e-6);
        losses.push_back(loss.to_vector());
        Tensor in_place = logits.clone(), loss2 = testing::poisoned({});
        softmax_cross_entropy_forward(ctx, in_place, labels, in_place, loss2, options);
        EXPECT_EQ(loss2.to_vector(), loss.to_vector());
        EXPECT_EQ(in_place.to_vector(), prob.to_vector());
      }
      EXPECT_EQ(losses[0], losses[1]);  // the same bits for any thread count
    }
  }
}

}  // namespace crema::kernels::softmax_testing
