// Dropout on CUDA: every version bit for bit against the CPU (the same hash), at sizes that leave
// a float4 tail and through unaligned pointers (the scalar fallback); the step counter advanced on
// the device by each forward; a forward captured in a CUDA graph drawing a new mask at each
// replay; the dispatch's device checks.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/dropout/dropout.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::DropoutVersion;
using testing::host_values;

// A step counter holding `value` on the context's device.
Tensor counter_at(Context& ctx, uint64_t value) {
  Tensor host(Shape{2});
  std::memcpy(host.raw(), &value, sizeof value);
  Tensor t = ctx.empty({2});
  t.copy_from(host);
  return t;
}

TEST(DropoutCuda, EveryVersionMatchesTheCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const uint64_t seed = 0x1234abcdULL, step = (uint64_t(1) << 33) + 5;
  const Tensor counter = counter_at(ctx, step);
  for (const int64_t n : {int64_t(1), int64_t(3), int64_t(4), int64_t(1001), int64_t(32000),
                          (int64_t(1) << 20) + 3}) {
    for (const float ratio : {0.0f, 0.5f, 0.8f}) {
      Random rng(static_cast<uint64_t>(n));
      const std::vector<float> xv = testing::random_values(rng, n);
      std::vector<float> want(xv.size());
      cpu::dropout_forward(n, xv.data(), want.data(), ratio, seed, step, 1);
      for (const DropoutVersion v : {DropoutVersion::scalar, DropoutVersion::vectorized}) {
        for (const int64_t offset : {int64_t(0), int64_t(1)}) {  // 1: pointers not 16-byte aligned
          SCOPED_TRACE(std::to_string(n) + " elements, ratio " + std::to_string(ratio) +
                       (v == DropoutVersion::scalar ? " scalar" : " vectorized") + " offset " +
                       std::to_string(offset));
          std::vector<float> padded(size_t(n + offset), 0.0f);
          std::copy(xv.begin(), xv.end(), padded.begin() + offset);
          const Tensor x = testing::to_device(ctx, {n + offset}, padded);
          Tensor y = testing::poisoned_device(ctx, {n + offset});
          const uint64_t* s = static_cast<const uint64_t*>(counter.raw());
          cuda::dropout_forward(n, x.data<float>() + offset, y.data<float>() + offset, ratio, seed,
                                s, v, ctx.stream());
          std::vector<float> got = host_values(ctx, y);
          got.erase(got.begin(), got.begin() + offset);
          EXPECT_TRUE(testing::same_bits(got, want));
          Tensor dx = testing::poisoned_device(ctx, {n + offset});
          cuda::dropout_backward(n, x.data<float>() + offset, dx.data<float>() + offset, ratio,
                                 seed, s, v, ctx.stream());
          got = host_values(ctx, dx);
          got.erase(got.begin(), got.begin() + offset);
          EXPECT_TRUE(testing::same_bits(got, want));
        }
      }
    }
  }
}

TEST(DropoutCuda, ForwardAdvancesTheStepOnTheDevice) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  const Shape shape{37, 29};
  Random rng(3);
  const std::vector<float> xv = testing::random_values(rng, shape_numel(shape));
  const Tensor x = testing::to_device(gpu, shape, xv), x_host = Tensor::from_vector(shape, xv);
  Tensor step = dropout_step_counter(gpu), step_host = dropout_step_counter(cpu);
  Tensor y = gpu.empty(shape), dx = gpu.empty(shape), y_host(shape), dx_host(shape);
  for (uint64_t pass = 1; pass <= 3; ++pass) {
    dropout_forward(gpu, x, y, 0.3f, 77, step);
    dropout_forward(cpu, x_host, y_host, 0.3f, 77, step_host);
    EXPECT_TRUE(testing::same_bits(host_values(gpu, y), y_host.to_vector())) << pass;
    EXPECT_EQ(dropout_step_value(step), pass);
    dropout_backward(gpu, x, dx, 0.3f, 77, step);
    dropout_backward(cpu, x_host, dx_host, 0.3f, 77, step_host);
    EXPECT_TRUE(testing::same_bits(host_values(gpu, dx), dx_host.to_vector())) << pass;
  }
}

TEST(DropoutCuda, GraphReplaysDrawNewMasks) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape{64, 50};
  Random rng(4);
  const std::vector<float> xv = testing::random_values(rng, shape_numel(shape));
  const Tensor x = testing::to_device(ctx, shape, xv);
  Tensor y = ctx.empty(shape), step = dropout_step_counter(ctx);
  ctx.synchronize();
  gpu::begin_capture(ctx.stream());
  dropout_forward(ctx, x, y, 0.5f, 5, step);
  gpu::Graph graph = gpu::end_capture(ctx.stream());
  std::vector<std::vector<float>> masks;
  for (uint64_t replay = 1; replay <= 3; ++replay) {
    gpu::launch(graph, ctx.stream());
    const std::vector<float> got = host_values(ctx, y);
    std::vector<float> want(xv.size());
    ref::dropout_forward(int64_t(xv.size()), xv.data(), want.data(), 0.5f, 5, replay);
    EXPECT_TRUE(testing::same_bits(got, want)) << "replay " << replay;
    EXPECT_EQ(dropout_step_value(step), replay);
    masks.push_back(got);
  }
  gpu::destroy_graph(graph);
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
}

TEST(DropoutCuda, RejectsTensorsOnAnotherDevice) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  Tensor x = ctx.empty({4}), y = ctx.empty({4}), host_step = dropout_step_counter(cpu);
  ctx.fill(x, 1.0f);
  try {
    dropout_forward(ctx, x, y, 0.5f, 1, host_step);
    ADD_FAILURE() << "accepted a host step counter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step is"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
