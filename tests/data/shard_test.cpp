// Sharded loading for training on several processes: every shard reads a disjoint part of each
// epoch, and the shards' batches together are the one-process stream of the global batch with
// the same seed; a test split is split into contiguous parts read once each.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>

#include "data/dataset.h"
#include "data/loader.h"
#include "tests/support/error_text.h"

namespace crema::data {
namespace {

// Sample i holds the pixels (i / 256, i % 256): a batch tells which samples it holds.
std::shared_ptr<const Dataset> numbered(int64_t size) {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < size; ++i) {
    pixels.push_back(uint8_t(i / 256));
    pixels.push_back(uint8_t(i % 256));
    labels.push_back(int32_t(i % 7));
  }
  return std::make_shared<InMemoryDataset>("numbered", Shape{2}, pixels, labels);
}

std::vector<int64_t> samples_of(const Batch& b) {
  std::vector<int64_t> out;
  const float* p = b.data.data<float>();
  for (int64_t i = 0; i < b.data.dim(0); ++i)
    out.push_back(int64_t(p[2 * i]) * 256 + int64_t(p[2 * i + 1]));
  return out;
}

DataLoaderOptions sharded(int64_t batch, bool shuffle, bool drop_last, int rank, int count) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = 5;
  o.num_workers = 0;
  o.shard_rank = rank;
  o.shard_count = count;
  return o;
}

TEST(Shard, TheShardsBatchesTogetherAreTheGlobalBatchOfOneProcess) {
  const auto dataset = numbered(103);  // 103 = 4 global batches of 24, 7 samples dropped
  for (const int count : {2, 3}) {
    const int64_t per_rank = 24 / count;
    DataLoader one(dataset, sharded(24, true, true, 0, 1));
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int r = 0; r < count; ++r) {
      ranks.push_back(
          std::make_unique<DataLoader>(dataset, sharded(per_rank, true, true, r, count)));
      EXPECT_EQ(ranks.back()->batches_per_epoch(), one.batches_per_epoch());
    }
    for (int64_t p = 0; p < 2 * one.batches_per_epoch() + 1; ++p) {  // across two epochs
      std::vector<int64_t> joined;
      for (auto& loader : ranks) {
        const std::vector<int64_t> part = samples_of(loader->next());
        EXPECT_EQ(int64_t(part.size()), per_rank);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, samples_of(one.next())) << "world " << count << ", batch " << p;
    }
  }
}

TEST(Shard, SeekingAShardGivesItsPartOfThatGlobalBatch) {
  const auto dataset = numbered(100);
  DataLoader one(dataset, sharded(20, true, true, 0, 1));
  DataLoader rank1(dataset, sharded(10, true, true, 1, 2));
  one.seek(3, 2);
  rank1.seek(3, 2);
  const std::vector<int64_t> whole = samples_of(one.next());
  EXPECT_EQ(samples_of(rank1.next()), std::vector<int64_t>(whole.begin() + 10, whole.end()));
}

TEST(Shard, ATestSplitIsReadOnceAcrossTheShards) {
  const auto dataset = numbered(101);
  std::vector<int64_t> all;
  int64_t counted = 0;
  for (int r = 0; r < 3; ++r) {
    DataLoader loader(dataset, sharded(16, false, false, r, 3));
    counted += loader.samples_per_epoch();
    for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
      const std::vector<int64_t> part = samples_of(loader.next());
      all.insert(all.end(), part.begin(), part.end());
    }
  }
  std::vector<int64_t> expected(101);
  std::iota(expected.begin(), expected.end(), int64_t(0));
  EXPECT_EQ(all, expected);
  EXPECT_EQ(counted, 101);
}

TEST(Shard, ShardOrderSlicesGlobalBatchesOrContiguousRanges) {
  const std::vector<int64_t> order = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_EQ(shard_order(order, 0, 2, 2, true), (std::vector<int64_t>{9, 8, 5, 4}));
  EXPECT_EQ(shard_order(order, 1, 2, 2, true), (std::vector<int64_t>{7, 6, 3, 2}));
  EXPECT_EQ(shard_order(order, 0, 3, 2, false), (std::vector<int64_t>{9, 8, 7}));
  EXPECT_EQ(shard_order(order, 2, 3, 2, false), (std::vector<int64_t>{3, 2, 1, 0}));
}

TEST(Shard, TooFewSamplesForTheGlobalBatchIsNamed) {
  EXPECT_CONTAINS(
      testing::error_of([&] { DataLoader(numbered(30), sharded(16, true, true, 0, 2)); }),
      "batch_size 16 x 2 ranks exceeds the 30 samples");
  EXPECT_CONTAINS(
      testing::error_of([&] { DataLoader(numbered(2), sharded(4, false, false, 0, 3)); }),
      "2 samples cannot be shared by 3 ranks");
}

}  // namespace
}  // namespace crema::data
