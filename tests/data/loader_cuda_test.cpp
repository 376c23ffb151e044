// The loader's workers assembling batches straight into pinned host memory (the Context's
// staging allocator), copied to the GPU asynchronously: the values arrive intact.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/context.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/support/cuda_test_util.h"

namespace crema::data {
namespace {

TEST(DataLoaderCuda, PinnedBatchesFromWorkerThreads) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // 50 samples of 1 x 3 x 4 with distinct bytes, labels i mod 7.
  std::vector<uint8_t> pixels(50 * 12);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 37 + 11) % 251);
  std::vector<int32_t> labels(50);
  for (int i = 0; i < 50; ++i) labels[size_t(i)] = i % 7;
  auto dataset = std::make_shared<InMemoryDataset>("pinned", Shape{1, 3, 4}, pixels, labels);
  DataLoaderOptions options;
  options.batch_size = 8;
  options.num_workers = 3;
  options.prefetch = 4;
  options.allocator = &ctx.staging_allocator();
  DataLoader loader(dataset, options);
  ASSERT_EQ(loader.batches_per_epoch(), 7);
  for (int b = 0; b < 14; ++b) {
    const Batch batch = loader.next();
    Tensor on_device = ctx.empty(batch.data.shape());
    ctx.copy(on_device, batch.data);
    const std::vector<float> back = on_device.to_vector();  // synchronizes
    const int64_t first = (b % 7) * 8;
    ASSERT_EQ(int64_t(back.size()), batch.data.dim(0) * 12);
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_EQ(back[i], float(pixels[size_t(first * 12) + i])) << b << " " << i;
    }
  }
  EXPECT_GT(ctx.staging_allocator().peak_bytes(), 0u);
}

}  // namespace
}  // namespace crema::data
