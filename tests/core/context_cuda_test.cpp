// Contexts on GPUs as independent handles (issue: crema as a library): each holds its device, its
// stream and its allocator; every Context operation and kernel dispatch makes the context's GPU
// current for its span (gpu::DeviceGuard) and restores the thread's own setting. Two contexts on
// one GPU used from two threads, and contexts on two GPUs used from one thread or from two, compute
// what each computes alone, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "tests/core/context_threads_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema {
namespace {

// Runs context_work on each (context, seed) in its own thread `rounds` times; true when every
// round gave `expected`.
bool concurrent_rounds_match(std::vector<Context*> contexts, std::vector<uint64_t> seeds,
                             const std::vector<std::vector<float>>& expected, int rounds) {
  std::vector<int> same(contexts.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < contexts.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < rounds; ++r) {
        same[i] += testing::context_work(*contexts[i], seeds[i]) == expected[i];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int s : same) {
    if (s != rounds) return false;
  }
  return true;
}

double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double error = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    error = std::max(error, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return error / scale;
}

TEST(ContextCuda, TwoContextsOnOneGpuInTwoThreads) {
  CREMA_REQUIRE_CUDA();
  Context first(Device::cuda(0), 1), second(Device::cuda(0), 2);
  const std::vector<float> alone_first = testing::context_work(first, 11);
  const std::vector<float> alone_second = testing::context_work(second, 12);
  Context cpu(Device::cpu());
  EXPECT_LE(max_relative_error(alone_first, testing::context_work(cpu, 11)), 1e-5);
  EXPECT_TRUE(
      concurrent_rounds_match({&first, &second}, {11, 12}, {alone_first, alone_second}, 20));
}

TEST(ContextCuda, ContextsOnTwoGpusFromOneThreadAndFromTwo) {
  CREMA_REQUIRE_CUDA();
  if (gpu::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  // cuda:1's context is made first; making cuda:0's leaves cuda:0 current in this thread, so
  // every use of the first below runs on a thread whose current device is another GPU.
  Context on_one(Device::cuda(1), 1);
  Context on_zero(Device::cuda(0), 2);
  ASSERT_EQ(gpu::current_device(), 0);
  const std::vector<float> alone_one = testing::context_work(on_one, 11);
  EXPECT_EQ(gpu::current_device(), 0) << "the guard restores the thread's device";
  const std::vector<float> alone_zero = testing::context_work(on_zero, 11);
  EXPECT_EQ(alone_one, alone_zero) << "the same GPU model and seed give the same bits";
  Context cpu(Device::cpu());
  EXPECT_LE(max_relative_error(alone_one, testing::context_work(cpu, 11)), 1e-5);
  // Interleaved on one thread, then one thread per GPU at once.
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(testing::context_work(on_one, 11), alone_one);
    EXPECT_EQ(testing::context_work(on_zero, 11), alone_zero);
  }
  EXPECT_TRUE(concurrent_rounds_match({&on_one, &on_zero}, {11, 11}, {alone_one, alone_zero}, 20));
  // A copy between the GPUs through either context.
  Tensor src = on_one.empty({257});
  on_one.fill(src, 3.5f);
  Tensor dst = on_zero.empty({257});
  on_zero.copy(dst, src);
  on_zero.synchronize();
  EXPECT_EQ(dst.to_vector(), std::vector<float>(257, 3.5f));
}

// zeros() and fill() on the GPU in every dtype it stores: 16-bit tensors get the value rounded to
// their type (1.5 and -2 are exact in both), a float32 one a float; a double is refused by name.
TEST(ContextCuda, FillsEveryDeviceDtype) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    Tensor t = ctx.zeros({3, 37}, dtype);
    EXPECT_EQ(t.to_vector(), std::vector<float>(111, 0.0f)) << dtype_name(dtype);
    ctx.fill(t, 1.5f);
    EXPECT_EQ(t.to_vector(), std::vector<float>(111, 1.5f)) << dtype_name(dtype);
    ctx.fill(t, -2.0f);
    EXPECT_EQ(t.to_vector(), std::vector<float>(111, -2.0f)) << dtype_name(dtype);
  }
  Tensor bf = ctx.empty({1}, DType::bf16);
  ctx.fill(bf, 1.0f + 1.0f / 256);  // halfway between bf16's 1 and 1 + 2^-7: to even, 1
  EXPECT_EQ(bf.to_vector(), std::vector<float>{1.0f});
  EXPECT_THROW(
      {
        Tensor d = ctx.empty({2}, DType::f64);
        ctx.fill(d, 1.0f);
      },
      Error);
}

TEST(ContextCuda, DeviceGuardSetsAndRestores) {
  CREMA_REQUIRE_CUDA();
  gpu::use_device(0);
  {
    const gpu::DeviceGuard same(0);
    EXPECT_EQ(gpu::current_device(), 0);
  }
  EXPECT_EQ(gpu::current_device(), 0);
  if (gpu::device_count() < 2) return;
  {
    const gpu::DeviceGuard other(1);
    EXPECT_EQ(gpu::current_device(), 1);
  }
  EXPECT_EQ(gpu::current_device(), 0);
}

}  // namespace
}  // namespace crema
