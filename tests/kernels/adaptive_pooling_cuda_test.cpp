// Adaptive pooling on CUDA: forward (values and argmax) and the gather backward bit for bit
// against the CPU path and within float32 rounding of ref<double>, on awkward sizes (N = 1, odd
// extents, unequal and overlapping windows, more outputs than inputs, C not a multiple of 8,
// global), ties and NaN, poisoned outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/pooling/adaptive_pooling.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

bool same_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

void check_cuda(Context& ctx, const AdaptivePool2dGeometry& g, PoolMode mode,
                const std::vector<float>& x, uint64_t seed) {
  const bool max = mode == PoolMode::max;
  SCOPED_TRACE("N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " " +
               std::to_string(g.H) + "x" + std::to_string(g.W) + " -> " + std::to_string(g.P) +
               "x" + std::to_string(g.Q) + (max ? " max" : " average"));
  Random rng(seed);
  const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
  const Tensor xh = Tensor::from_vector(xs, x), dyh = testing::random_tensor(rng, ys);
  const Tensor xg = testing::to_device(ctx, xh), dyg = testing::to_device(ctx, dyh);
  Tensor y = testing::poisoned_device(ctx, ys), argmax = testing::poisoned_device(ctx, ys);
  Tensor dx = testing::poisoned_device(ctx, xs);
  adaptive_pool2d_forward(ctx, g, mode, xg, y, max ? &argmax : nullptr);
  adaptive_pool2d_backward(ctx, g, mode, dyg, max ? &argmax : nullptr, dx);
  const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);

  Context cpu_ctx(Device::cpu(), 1, 1);
  Tensor y_cpu(ys), argmax_cpu(ys), dx_cpu(xs);
  adaptive_pool2d_forward(cpu_ctx, g, mode, xh, y_cpu, max ? &argmax_cpu : nullptr);
  adaptive_pool2d_backward(cpu_ctx, g, mode, dyh, max ? &argmax_cpu : nullptr, dx_cpu);
  EXPECT_TRUE(same_or_both_nan(yv, y_cpu.to_vector()));
  EXPECT_TRUE(same_or_both_nan(dxv, dx_cpu.to_vector()));
  if (max) {
    EXPECT_EQ(host_values(ctx, argmax), argmax_cpu.to_vector());
  }
  if (testing::count_nan(x) > 0) return;

  const std::vector<double> xd = testing::to_double(xh), dyd = testing::to_double(dyh);
  std::vector<double> y_ref(size_t(shape_numel(ys))), argmax_ref(y_ref.size());
  std::vector<double> dx_ref(size_t(shape_numel(xs)));
  ref::adaptive_pool2d_forward(g, mode, xd.data(), y_ref.data(), argmax_ref.data());
  ref::adaptive_pool2d_backward(g, mode, dyd.data(), argmax_ref.data(), dx_ref.data());
  EXPECT_LT(testing::rel_error(yv, y_ref), 1e-6);
  EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-6);
}

TEST(AdaptivePool2dCuda, MatchesCpuOnAwkwardSizes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<AdaptivePool2dGeometry> cases = {
      {1, 1, 1, 1, 1, 1},    {1, 3, 7, 5, 3, 4},     {2, 5, 3, 6, 5, 3},
      {3, 7, 13, 11, 7, 7},  {1, 13, 9, 9, 4, 2},    {1, 2, 5, 5, 10, 10},
      {4, 37, 31, 29, 6, 6}, {2, 131, 17, 17, 1, 1}, {8, 96, 27, 27, 6, 6},  // AlexNet's 6x6
  };
  uint64_t seed = 70;
  for (const AdaptivePool2dGeometry& g : cases) {
    Random rng(++seed);
    const std::vector<float> x = testing::random_values(rng, g.N * g.C * g.H * g.W);
    for (PoolMode mode : {PoolMode::max, PoolMode::average}) check_cuda(ctx, g, mode, x, ++seed);
  }
}

TEST(AdaptivePool2dCuda, TiesAndNaNPickTheSameElementAsTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const AdaptivePool2dGeometry g{2, 3, 9, 10, 4, 3};
  Random rng(5);
  std::vector<float> x(static_cast<size_t>(g.N * g.C * g.H * g.W));
  for (float& v : x) v = float(rng.below(3));
  check_cuda(ctx, g, PoolMode::max, x, 1);
  x[17] = x[200] = testing::kNaN;
  check_cuda(ctx, g, PoolMode::max, x, 2);
  check_cuda(ctx, g, PoolMode::average, x, 3);
}

}  // namespace
}  // namespace crema::kernels
