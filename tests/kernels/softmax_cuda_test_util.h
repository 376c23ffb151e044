// Shared by the CUDA softmax tests (softmax_cuda_test.cpp, softmax_log_smoothing_cuda_test.cpp):
// the versions, the normalizations, the awkward shapes for the GPU, and one forward + backward
// of the softmax cross-entropy (Case and its extents: softmax_test_util.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"

#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/softmax_test_util.h"

namespace crema::kernels::softmax_testing {

using testing::host_values;

const cuda::SoftmaxVersion kVersions[] = {cuda::SoftmaxVersion::thread_per_position,
                                          cuda::SoftmaxVersion::warp_per_position,
                                          cuda::SoftmaxVersion::by_shape};
using loss_testing::kModes;

inline const std::vector<Case>& cases() {
  static const std::vector<Case> all =
      {
          {{1, 1}, 1},         {{1, 10}, 1}, {{7, 13}, -1},  {{64, 10}, 1},
          {{256, 10}, 1},      {{5, 33}, 1}, {{7, 1000}, 1}, {{3, 5, 4, 7}, 1},
          {{2, 3, 300}, 1},    {{5, 3}, 0},  {{2, 3, 4}, 2}, {{2, 21, 20, 20}, 1},
          {{3, 5, 40, 40}, 1},  // 4800 positions: the backward counts labels in a separate kernel
      };
  return all;
}

struct LossRun {
  std::vector<float> loss, prob, dlogits;
};

// Forward and backward of `version`; with in_place, prob is written over a copy of the logits.
inline LossRun run_loss(Context& ctx, const Extents& e, const Shape& shape, const Tensor& logits,
                        const Tensor& labels, const Tensor& top_grad,
                        const SoftmaxLossOptions& options, cuda::SoftmaxVersion version,
                        bool in_place = false) {
  const size_t bytes =
      cuda::softmax_cross_entropy_workspace_bytes(e.outer, e.C, e.inner, options, version);
  Tensor workspace = ctx.empty({int64_t(bytes / 4) + 1});
  Tensor prob = testing::poisoned_device(ctx, shape);
  if (in_place) ctx.copy(prob, logits);
  Tensor dlogits = testing::poisoned_device(ctx, shape), loss = testing::poisoned_device(ctx, {});
  cuda::softmax_cross_entropy_forward(
      e.outer, e.C, e.inner, in_place ? prob.data<float>() : logits.data<float>(),
      labels.data<float>(), options, prob.data<float>(), loss.data<float>(),
      workspace.data<float>(), version, ctx.stream());
  cuda::softmax_cross_entropy_backward(
      e.outer, e.C, e.inner, prob.data<float>(), labels.data<float>(), top_grad.data<float>(),
      options, dlogits.data<float>(), workspace.data<float>(), ctx.stream());
  return {host_values(ctx, loss), host_values(ctx, prob), host_values(ctx, dlogits)};
}

// The four functions of a softmax-like op: softmax or log-softmax.
struct SoftmaxOp {
  void (*ref_forward)(int64_t outer, int64_t C, int64_t inner, const double* x, double* y);
  void (*ref_backward)(int64_t outer, int64_t C, int64_t inner, const double* y, const double* dy,
                       double* dx);
  void (*forward)(int64_t outer, int64_t C, int64_t inner, const float* x, float* y,
                  cuda::SoftmaxVersion version, gpu::Stream stream);
  void (*backward)(int64_t outer, int64_t C, int64_t inner, const float* y, const float* dy,
                   float* dx, cuda::SoftmaxVersion version, gpu::Stream stream);
};

// Every CUDA version of `op` against ref<double> on every case, out of place and in place (y over
// x, dx over dy: the same bits), inputs uniform in [-range, range).
inline void check_every_version(const SoftmaxOp& op, uint64_t seed, float range) {
  Context ctx(Device::cuda(0));
  for (const Case& c : cases()) {
    const Extents e = extents(c);
    Random rng(++seed);
    const Tensor x = testing::random_tensor(rng, c.shape, -range, range);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
    std::vector<double> y_ref(xd.size()), dx_ref(xd.size());
    op.ref_forward(e.outer, e.C, e.inner, xd.data(), y_ref.data());
    op.ref_backward(e.outer, e.C, e.inner, y_ref.data(), dyd.data(), dx_ref.data());
    const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
    for (cuda::SoftmaxVersion version : kVersions) {
      SCOPED_TRACE(describe(c) + " version " + std::to_string(int(version)));
      Tensor y = testing::poisoned_device(ctx, c.shape),
             dx = testing::poisoned_device(ctx, c.shape);
      op.forward(e.outer, e.C, e.inner, xg.data<float>(), y.data<float>(), version, ctx.stream());
      op.backward(e.outer, e.C, e.inner, y.data<float>(), dyg.data<float>(), dx.data<float>(),
                  version, ctx.stream());
      const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
      EXPECT_LT(testing::rel_error(yv, y_ref), 1e-5);
      EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-5);
      Tensor t = testing::to_device(ctx, x), g = testing::to_device(ctx, dy);
      op.forward(e.outer, e.C, e.inner, t.data<float>(), t.data<float>(), version, ctx.stream());
      op.backward(e.outer, e.C, e.inner, t.data<float>(), g.data<float>(), g.data<float>(), version,
                  ctx.stream());
      EXPECT_TRUE(testing::same_bits(host_values(ctx, t), yv));
      EXPECT_TRUE(testing::same_bits(host_values(ctx, g), dxv));
    }
  }
}

// The cross-entropy (label smoothing eps) of every version against ref<double> on every case and
// normalization, outputs poisoned first, and with prob written over the logits: the same bits.
inline void check_loss_every_version(uint64_t seed, float label_smoothing) {
  Context ctx(Device::cuda(0));
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
      const SoftmaxLossOptions options = loss_options(c, mode, label_smoothing);
      const LossExpected want = loss_expected(e, xd, ld, options, double(0.7f));
      for (cuda::SoftmaxVersion version : kVersions) {
        SCOPED_TRACE(describe(c) + " normalization " + std::to_string(int(mode)) + " version " +
                     std::to_string(int(version)));
        const LossRun r = run_loss(ctx, e, c.shape, logits_g, labels_g, top_grad, options, version);
        EXPECT_NEAR(r.loss[0], want.loss, 1e-5 * std::max(1.0, std::abs(want.loss)));
        EXPECT_LT(testing::rel_error(r.prob, want.prob), 1e-5);
        EXPECT_LT(testing::rel_error(r.dlogits, want.dlogits), 1e-5);
        const LossRun aliased =
            run_loss(ctx, e, c.shape, logits_g, labels_g, top_grad, options, version, true);
        EXPECT_TRUE(testing::same_bits(aliased.loss, r.loss));
        EXPECT_TRUE(testing::same_bits(aliased.prob, r.prob));
      }
    }
  }
}

}  // namespace crema::kernels::softmax_testing
