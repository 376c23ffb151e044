// Synchronized batch normalization's kernels on CUDA against the CPU's (ref:: in float) through the
// Tensor-level functions, on awkward shapes (N = 1, two values per channel, [N, C] rows, more
// channels than an H100 has SMs, a channel longer than a block's stride), outputs poisoned with
// NaN: the sums (double; a fixed tree against a sequential loop), the statistics and the running
// ones, the sync backward with and without dx, dgamma and dbeta accumulating; bit-identical
// repeats.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/sync_batch_norm.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::rel_error;

// Everything the kernels write, on the host.
struct Outputs {
  std::vector<double> sums, grad_sums;
  std::vector<float> mean, var, running_mean, running_var, tracked, y, save_mean, save_invstd;
  std::vector<float> dx, dgamma, dbeta;
};

std::vector<double> doubles(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), DType::f64);
  host.copy_from(t);
  return {host.data<double>(), host.data<double>() + host.numel()};
}

Tensor on(Context& ctx, const Shape& shape, const std::vector<float>& values) {
  Tensor t = ctx.empty(shape);
  t.copy_from(Tensor::from_vector(shape, values));
  return t;
}

Tensor poisoned(Context& ctx, const Shape& shape, DType dtype = DType::f32) {
  Tensor t = ctx.empty(shape, dtype);
  if (dtype == DType::f32) {
    ctx.fill(t, testing::kNaN);
  } else {
    Tensor host(shape, dtype);
    for (int64_t i = 0; i < host.numel(); ++i) host.data<double>()[i] = testing::kNaN;
    t.copy_from(host);
  }
  return t;
}

// The forward and backward of one rank whose global sums are its own (the collective is the
// identity), on ctx's device.
Outputs run(Context& ctx, const Shape& shape, bool want_dx, uint64_t seed) {
  Random rng(seed);
  const int64_t C = shape[1];
  std::vector<float> xv = testing::random_values(rng, shape_numel(shape));
  const int64_t S = shape_count(shape, 2, int(shape.size()));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += float((int64_t(i) / S) % C % 5) * 0.7f - 1.0f;
  const Tensor x = on(ctx, shape, xv);
  const Tensor dy = on(ctx, shape, testing::random_values(rng, shape_numel(shape)));
  const Tensor gamma = on(ctx, {C}, testing::random_values(rng, C, 0.5, 1.5));
  const Tensor beta = on(ctx, {C}, testing::random_values(rng, C));
  Tensor rm = on(ctx, {C}, testing::random_values(rng, C));
  Tensor rv = on(ctx, {C}, testing::random_values(rng, C, 0.5, 2.0));
  Tensor tracked = on(ctx, {1}, {2.0f});
  Tensor dgamma = on(ctx, {C}, testing::random_values(rng, C));
  Tensor dbeta = on(ctx, {C}, testing::random_values(rng, C));
  Tensor sums = poisoned(ctx, {2 * C + 1}, DType::f64),
         grad_sums = poisoned(ctx, {2 * C + 1}, DType::f64);
  Tensor mean = poisoned(ctx, {C}), var = poisoned(ctx, {C}), y = poisoned(ctx, shape);
  Tensor save_mean = poisoned(ctx, {C}), save_invstd = poisoned(ctx, {C});
  Tensor dx = poisoned(ctx, shape), none;

  batch_norm_channel_sums(ctx, x, sums);
  batch_norm_statistics(ctx, sums, 0.2f, mean, var, rm, rv, tracked);
  batch_norm_forward_inference(ctx, x, gamma, beta, mean, var, 1e-3f, y, save_mean, save_invstd);
  batch_norm_gradient_sums(ctx, x, dy, save_mean, save_invstd, grad_sums);
  sync_batch_norm_backward(ctx, x, dy, gamma, save_mean, save_invstd, grad_sums, grad_sums,
                           want_dx ? dx : none, dgamma, dbeta);
  ctx.synchronize();
  return {doubles(ctx, sums),    doubles(ctx, grad_sums), mean.to_vector(),    var.to_vector(),
          rm.to_vector(),        rv.to_vector(),          tracked.to_vector(), y.to_vector(),
          save_mean.to_vector(), save_invstd.to_vector(), dx.to_vector(),      dgamma.to_vector(),
          dbeta.to_vector()};
}

// Relative to the largest magnitude: double sums of ~1e4 terms in two orders.
double sums_error(const std::vector<double>& a, const std::vector<double>& b) {
  double largest = 1.0, diff = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    largest = std::max(largest, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return diff / largest;
}

TEST(SyncBatchNormCuda, MatchesTheCpuOnAwkwardShapes) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  for (const Shape& shape : std::vector<Shape>{
           {3, 5, 7, 1}, {1, 2, 1, 300}, {2, 140, 3, 3}, {5, 1000}, {1, 3, 1, 2}, {4, 2, 33, 35}}) {
    for (const bool want_dx : {true, false}) {
      SCOPED_TRACE(shape_str(shape) + (want_dx ? "" : " no dx"));
      const Outputs g = run(gpu, shape, want_dx, 7), c = run(cpu, shape, want_dx, 7);
      EXPECT_LT(sums_error(g.sums, c.sums), 1e-12);
      EXPECT_LT(sums_error(g.grad_sums, c.grad_sums), 1e-12);
      for (const auto& [name, got, want] : std::vector<
               std::tuple<std::string, const std::vector<float>*, const std::vector<float>*>>{
               {"mean", &g.mean, &c.mean},
               {"var", &g.var, &c.var},
               {"running_mean", &g.running_mean, &c.running_mean},
               {"running_var", &g.running_var, &c.running_var},
               {"y", &g.y, &c.y},
               {"save_invstd", &g.save_invstd, &c.save_invstd},
               {"dgamma", &g.dgamma, &c.dgamma},
               {"dbeta", &g.dbeta, &c.dbeta}}) {
        EXPECT_LT(rel_error(*got, testing::to_double(*want)), 1e-5) << name;
      }
      EXPECT_EQ(g.tracked, std::vector<float>{3.0f});
      if (want_dx) {
        EXPECT_LT(rel_error(g.dx, testing::to_double(c.dx)), 1e-5);
      } else {
        EXPECT_EQ(testing::count_nan(g.dx), shape_numel(shape));  // untouched
      }
    }
  }
}

TEST(SyncBatchNormCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  const Outputs a = run(gpu, {8, 16, 14, 14}, true, 9), b = run(gpu, {8, 16, 14, 14}, true, 9);
  EXPECT_EQ(a.sums, b.sums);
  EXPECT_EQ(a.grad_sums, b.grad_sums);
  EXPECT_TRUE(testing::same_bits(a.dx, b.dx));
  EXPECT_TRUE(testing::same_bits(a.dgamma, b.dgamma));
}

}  // namespace
}  // namespace crema::kernels
