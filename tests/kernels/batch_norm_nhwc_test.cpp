// Batch normalization on channels-last (nhwc) tensors on the CPU, at the Tensor level: the float64
// reference in nhwc against the same reference in nchw on the same logical values (the [N*H*W, C]
// rows view against the [N, C, H*W] planes: 1e-12 relative, sums in another order), and the
// errors of a layout that does not match, of per-activation mode on nhwc, and of bf16 on the CPU.
// (float32 nhwc, plain and fused: batch_norm_relu_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/batch_norm/batch_norm.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::in_layout;

// A float64 host tensor of `shape` from uniform values in [low, high), in nchw.
Tensor f64(Random& rng, const Shape& shape, double low, double high) {
  Tensor t(shape, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = rng.uniform(low, high);
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor nchw = t.ndim() == 4 ? in_layout(t, Layout::nchw) : t;
  return {nchw.data<double>(), nchw.data<double>() + nchw.numel()};
}

double rel(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// One training forward and one backward (batch statistics, then fixed ones), every output.
std::vector<std::vector<double>> run(const Shape& shape, Layout layout, uint64_t seed) {
  Context ctx;
  Random rng(seed);
  const int64_t C = shape[1];
  const Tensor x = in_layout(f64(rng, shape, -2.0, 3.0), layout);
  const Tensor dy = in_layout(f64(rng, shape, -1.0, 1.0), layout);
  Tensor gamma = f64(rng, {C}, 0.5, 1.5), beta = f64(rng, {C}, -0.5, 0.5);
  Tensor running_mean = f64(rng, {C}, -0.1, 0.1), running_var = f64(rng, {C}, 0.5, 1.5);
  Tensor tracked = f64(rng, {1}, 0.0, 0.0), mean(Shape{C}, DType::f64),
         invstd(Shape{C}, DType::f64);
  Tensor y = in_layout(x, layout), dx = in_layout(x, layout), dx_fixed = in_layout(x, layout);
  Tensor dgamma = f64(rng, {C}, 0.0, 0.0), dbeta = f64(rng, {C}, 0.0, 0.0);
  batch_norm_forward_training(ctx, x, gamma, beta, 1e-3f, 0.2f, y, mean, invstd, running_mean,
                              running_var, tracked);
  batch_norm_backward(ctx, x, dy, gamma, mean, invstd, true, dx, dgamma, dbeta);
  Tensor none;
  batch_norm_backward(ctx, x, dy, gamma, mean, invstd, false, dx_fixed, none, none);
  Tensor y_inference = in_layout(x, layout);
  batch_norm_forward_inference(ctx, x, gamma, beta, running_mean, running_var, 1e-3f, y_inference,
                               mean, invstd);
  return {values(y),     values(dx),           values(dx_fixed),    values(dgamma),
          values(dbeta), values(running_mean), values(running_var), values(y_inference)};
}

TEST(BatchNormNhwc, ReferenceMatchesNchw) {
  for (const Shape& shape :
       {Shape{1, 3, 5, 7}, Shape{2, 13, 3, 3}, Shape{3, 4, 1, 1}, Shape{2, 9, 6, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    const auto nhwc = run(shape, Layout::nhwc, 3), nchw = run(shape, Layout::nchw, 3);
    for (size_t i = 0; i < nchw.size(); ++i) EXPECT_LT(rel(nhwc[i], nchw[i]), 1e-12) << i;
  }
}

TEST(BatchNormNhwc, Errors) {
  using crema::testing::error_of;
  Context ctx;
  Tensor x({2, 3, 4, 5}), y({2, 3, 4, 5}), gamma({3}), beta({3}), mean({3}), invstd({3});
  for (Tensor* t : {&x, &gamma, &beta}) t->fill(1.0f);
  x.set_layout(Layout::nhwc);
  Tensor none;
  EXPECT_CONTAINS(error_of([&] {
                    batch_norm_forward_training(ctx, x, gamma, beta, 1e-5f, 0.1f, y, mean, invstd,
                                                none, none, none);
                  }),
                  "batch_norm_forward_training: y is f32[2, 3, 4, 5] on cpu, expected nhwc");
  y.set_layout(Layout::nhwc);
  Tensor stats({3, 4, 5});
  EXPECT_CONTAINS(error_of([&] {
                    batch_norm_per_activation_forward_training(ctx, x, none, none, 1e-5f, 0.1f, y,
                                                               stats, stats, none, none, none);
                  }),
                  "per-activation statistics follow the [C, H, W] order of nchw");
  Tensor xb({2, 3, 4, 5}, DType::bf16), yb({2, 3, 4, 5}, DType::bf16);
  xb.set_layout(Layout::nhwc);
  yb.set_layout(Layout::nhwc);
  EXPECT_CONTAINS(error_of([&] {
                    batch_norm_forward_training(ctx, xb, gamma, beta, 1e-5f, 0.1f, yb, mean, invstd,
                                                none, none, none);
                  }),
                  "no implementation for bf16 nhwc on cpu");
}

}  // namespace
}  // namespace crema::kernels
