// Stochastic depth on CUDA bit for bit against the CPU (the same hash per row): row sizes with and
// without a multiple of 4 (the float4 and scalar paths), one row, many rows, an unaligned pointer,
// in place; the counter advanced on the device and reused by the backward.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/dropout/dropout.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

Tensor counter_at(Context& ctx, uint64_t value) {
  Tensor host(Shape{2});
  std::memcpy(host.raw(), &value, sizeof value);
  Tensor t = ctx.empty({2});
  t.copy_from(host);
  return t;
}

TEST(StochasticDepthCuda, MatchesTheCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const uint64_t seed = 0xfeedULL, step = (uint64_t(1) << 35) + 3;
  const Tensor counter = counter_at(ctx, step);
  const auto* device_step = static_cast<const uint64_t*>(counter.raw());
  for (const auto& [rows, row_size] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 4096}, {3, 7}, {5, 12}, {64, 96 * 56 * 56 / 8}, {70000, 3}, {37, 1001}}) {
    for (const float p : {0.1f, 0.5f, 0.9f}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(row_size) + " p " +
                   std::to_string(p));
      Random rng(uint64_t(rows + row_size));
      const std::vector<float> xv = testing::random_values(rng, rows * row_size);
      std::vector<float> want(xv.size());
      cpu::stochastic_depth(rows, row_size, xv.data(), want.data(), p, seed, step, 2);
      const Tensor x = testing::to_device(ctx, {rows * row_size}, xv);
      Tensor y = testing::poisoned_device(ctx, {rows * row_size});
      cuda::stochastic_depth(rows, row_size, x.data<float>(), y.data<float>(), p, seed, device_step,
                             ctx.stream());
      EXPECT_TRUE(testing::same_bits(host_values(ctx, y), want));
      // In place.
      Tensor z = testing::to_device(ctx, {rows * row_size}, xv);
      cuda::stochastic_depth(rows, row_size, z.data<float>(), z.data<float>(), p, seed, device_step,
                             ctx.stream());
      EXPECT_TRUE(testing::same_bits(host_values(ctx, z), want));
    }
  }
  // One float past a 16-byte boundary: the scalar path even for row_size % 4 == 0.
  const int64_t rows = 9, row_size = 8;
  Random rng(5);
  const std::vector<float> xv = testing::random_values(rng, rows * row_size + 1);
  std::vector<float> want(size_t(rows * row_size));
  cpu::stochastic_depth(rows, row_size, xv.data() + 1, want.data(), 0.5f, seed, step, 1);
  const Tensor x = testing::to_device(ctx, {rows * row_size + 1}, xv);
  Tensor y = testing::poisoned_device(ctx, {rows * row_size + 1});
  cuda::stochastic_depth(rows, row_size, x.data<float>() + 1, y.data<float>() + 1, 0.5f, seed,
                         device_step, ctx.stream());
  std::vector<float> got = host_values(ctx, y);
  got.erase(got.begin());
  EXPECT_TRUE(testing::same_bits(got, want));
}

TEST(StochasticDepthCuda, CounterAdvancedOnTheDevice) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx(Device::cpu(), 1, 1);
  Random rng(8);
  const Shape shape = {33, 3, 7, 5};
  const Tensor xh = testing::random_tensor(rng, shape, 0.5, 1.5);
  const Tensor x = testing::to_device(ctx, xh);
  Tensor step = dropout_step_counter(ctx), cpu_step = dropout_step_counter(cpu_ctx);
  Tensor y = testing::poisoned_device(ctx, shape), dx = testing::poisoned_device(ctx, shape);
  Tensor y_cpu(shape), dx_cpu(shape);
  for (int pass = 0; pass < 3; ++pass) {
    stochastic_depth_forward(ctx, x, y, 0.3f, 11, step);
    stochastic_depth_backward(ctx, x, dx, 0.3f, 11, step);
    stochastic_depth_forward(cpu_ctx, xh, y_cpu, 0.3f, 11, cpu_step);
    stochastic_depth_backward(cpu_ctx, xh, dx_cpu, 0.3f, 11, cpu_step);
    EXPECT_TRUE(testing::same_bits(host_values(ctx, y), y_cpu.to_vector()));
    EXPECT_TRUE(testing::same_bits(host_values(ctx, dx), dx_cpu.to_vector()));
  }
  EXPECT_EQ(dropout_step_value(step), 3u);
}

}  // namespace
}  // namespace crema::kernels
