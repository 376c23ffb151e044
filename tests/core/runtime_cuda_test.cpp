// The CUDA runtime under a Context: device tensors, stream-ordered fills and copies, the caching
// allocator's counters, out-of-memory messages and graph capture.
#include <gtest/gtest.h>

#include <string>

#include "core/context.h"
#include "core/error.h"
#include "tests/support/cuda_test_util.h"

namespace crema {
namespace {

TEST(RuntimeCuda, TensorsRoundTripAndFill) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Tensor host = Tensor::from_vector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor dev = ctx.empty({2, 3});
  EXPECT_TRUE(dev.device().is_cuda());
  dev.copy_from(host);
  EXPECT_EQ(dev.to_vector(), host.to_vector());
  ctx.fill(dev, 2.5f);
  ctx.synchronize();
  EXPECT_EQ(dev.to_vector(), std::vector<float>(6, 2.5f));
  Tensor other = ctx.empty({6});
  ctx.copy(other, dev);
  EXPECT_EQ(other.to_vector(), std::vector<float>(6, 2.5f));
}

TEST(RuntimeCuda, AllocatorCachesAndReports) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const size_t before = ctx.allocator().current_bytes();
  const void* first = nullptr;
  {
    Tensor t = ctx.empty({1 << 20});
    first = t.raw();
    EXPECT_GE(ctx.allocator().current_bytes(), before + (size_t(4) << 20));
  }
  EXPECT_EQ(ctx.allocator().current_bytes(), before);
  Tensor again = ctx.empty({1 << 20});
  EXPECT_EQ(again.raw(), first);  // from the cache, no cudaMalloc
  EXPECT_GE(ctx.allocator().peak_bytes(), size_t(4) << 20);
}

TEST(RuntimeCuda, OutOfMemorySaysHowMuch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  try {
    Tensor huge = ctx.empty({int64_t(1) << 40});  // 4 TiB
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of memory on cuda:0: asked for 4398046511104 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("free"), std::string::npos) << message;
  }
}

TEST(RuntimeCuda, MissingDeviceIsAnError) {
  CREMA_REQUIRE_CUDA();
  try {
    Context ctx(Device::cuda(gpu::device_count()));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not available"), std::string::npos) << e.what();
  }
}

TEST(RuntimeCuda, GraphReplaysCapturedWork) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor t = ctx.empty({1000});
  Tensor src = ctx.empty({1000});
  ctx.fill(src, 7.0f);
  gpu::begin_capture(ctx.stream());
  ctx.copy(t, src);
  const gpu::Graph graph = gpu::end_capture(ctx.stream());
  ctx.fill(t, 0.0f);
  ctx.synchronize();
  EXPECT_EQ(t.to_vector()[999], 0.0f);  // captured, not run
  gpu::launch(graph, ctx.stream());
  ctx.synchronize();
  EXPECT_EQ(t.to_vector(), std::vector<float>(1000, 7.0f));
  gpu::destroy_graph(graph);
}

}  // namespace
}  // namespace crema
