// Stochastic depth on the CPU (kernels/dropout/dropout.h): whole rows kept (scaled by 1 / (1 - p))
// or zeroed, the kept fraction, the row's draw the same as dropout's draw for unit n, the float32
// path bit for bit the reference (threaded or not), float64, the counter advanced by each forward
// and reused by the backward, and the errors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/dropout/dropout.h"
#include "kernels/dropout/dropout_hash.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

TEST(StochasticDepth, RowsKeptOrZeroedWithDropoutsDraw) {
  const int64_t rows = 4096, row_size = 5;
  const float p = 0.3f;
  const uint64_t seed = 77, step = 9;
  Random rng(1);
  const std::vector<float> x = testing::random_values(rng, rows * row_size, 0.5, 1.5);
  std::vector<float> y(x.size());
  ref::stochastic_depth(rows, row_size, x.data(), y.data(), p, seed, step);
  const uint64_t key = dropout_hash::key(seed, step);
  const uint32_t threshold = dropout_hash::threshold(p);
  int64_t kept = 0;
  for (int64_t n = 0; n < rows; ++n) {
    const bool keep = dropout_hash::keep(key, uint64_t(n), threshold);
    kept += keep;
    for (int64_t i = n * row_size; i < (n + 1) * row_size; ++i) {
      ASSERT_EQ(y[size_t(i)], keep ? x[size_t(i)] * dropout_scale(p) : 0.0f) << n;
    }
  }
  // 1 - p within 5 standard deviations of a binomial(4096, 0.7).
  EXPECT_NEAR(double(kept) / rows, 1.0 - p, 5 * std::sqrt(p * (1 - p) / rows));
}

TEST(StochasticDepth, CpuMatchesReferenceBitForBit) {
  for (const auto& [rows, row_size] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {64, 1000}, {7, 4099}, {128, 3}}) {
    Random rng(uint64_t(rows * row_size));
    const std::vector<float> x = testing::random_values(rng, rows * row_size);
    std::vector<float> want(x.size());
    ref::stochastic_depth(rows, row_size, x.data(), want.data(), 0.4f, 5, 123);
    for (int threads : {1, 3}) {
      std::vector<float> got(x.size(), testing::kNaN);
      cpu::stochastic_depth(rows, row_size, x.data(), got.data(), 0.4f, 5, 123, threads);
      EXPECT_EQ(got, want) << rows << "x" << row_size << " on " << threads << " threads";
    }
  }
}

// The Tensor level: rows are dim 0; the forward advances the counter, the backward uses the last
// forward's mask; float64 runs the reference.
TEST(StochasticDepth, ForwardAdvancesBackwardReusesTheMask) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(3);
  const Shape shape = {64, 3, 5, 2};
  const Tensor x = testing::random_tensor(rng, shape, 0.5, 1.5);
  Tensor step = dropout_step_counter(ctx), y(shape), dx(shape);
  const Tensor ones = Tensor::from_vector(shape, std::vector<float>(size_t(x.numel()), 1.0f));
  stochastic_depth_forward(ctx, x, y, 0.5f, 42, step);
  EXPECT_EQ(dropout_step_value(step), 1u);
  const std::vector<float> first = y.to_vector();
  stochastic_depth_backward(ctx, ones, dx, 0.5f, 42, step);
  const std::vector<float> xv = x.to_vector(), dxv = dx.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(dxv[i], first[i] != 0.0f ? 2.0f : 0.0f) << i;
  stochastic_depth_forward(ctx, x, y, 0.5f, 42, step);
  EXPECT_EQ(dropout_step_value(step), 2u);
  EXPECT_NE(y.to_vector(), first);

  Tensor x64(shape, DType::f64), y64(shape, DType::f64);
  for (int64_t i = 0; i < x.numel(); ++i) x64.data<double>()[i] = double(xv[size_t(i)]);
  Tensor step64 = dropout_step_counter(ctx);
  stochastic_depth_forward(ctx, x64, y64, 0.5f, 42, step64);
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_EQ(y64.data<double>()[i] != 0.0, first[size_t(i)] != 0.0f) << i;
  }
}

TEST(StochasticDepth, Errors) {
  Context ctx(Device::cpu(), 1, 1);
  Tensor x({2, 3}), y({2, 3}), wrong({3, 2}), step = dropout_step_counter(ctx);
  EXPECT_CONTAINS(
      crema::testing::error_of([&] { stochastic_depth_forward(ctx, x, y, 1.0f, 1, step); }),
      "ratio");
  EXPECT_CONTAINS(
      crema::testing::error_of([&] { stochastic_depth_forward(ctx, x, wrong, 0.5f, 1, step); }),
      "stochastic_depth_forward");
}

}  // namespace
}  // namespace crema::kernels
