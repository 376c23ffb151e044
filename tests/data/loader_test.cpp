#include "data/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tests/data/data_test_util.h"

namespace crema::data {
namespace {

// Samples that carry their index: pixel j of sample i is 1000 i + j + 1, and its label is
// (3 i) mod 11, so a sample whose pixels and label were separated shows it. Optionally slow
// (a pause per sample) or failing at one index.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(int64_t size, Shape sample_shape = {2, 3}, int64_t fail_at = -1,
                        std::chrono::microseconds delay = {})
      : size_(size), shape_(std::move(sample_shape)), fail_at_(fail_at), delay_(delay) {}

  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return 11; }
  void read_sample(int64_t index, Image& out) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (index == fail_at_) throw Error("sample " + std::to_string(index) + " is unreadable");
    out.reset(shape_);
    for (int64_t j = 0; j < sample_numel(); ++j)
      out.pixels[size_t(j)] = float(1000 * index + j + 1);
  }
  int64_t label(int64_t index) const override { return (3 * index) % 11; }
  std::string description() const override { return "index dataset"; }

 private:
  int64_t size_;
  Shape shape_;
  int64_t fail_at_;
  std::chrono::microseconds delay_;
};

DataLoaderOptions options(int64_t batch_size, bool shuffle, bool drop_last, uint64_t seed = 1,
                          int num_workers = 1, int prefetch = 2) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  o.num_workers = num_workers;
  o.prefetch = prefetch;
  return o;
}

// The sample indices of a batch, checking on the way that every pixel and the label belong to
// the sample of pixel 0 (IndexDataset's encoding).
std::vector<int64_t> sample_indices(const Batch& batch) {
  const int64_t count = batch.data.dim(0);
  const int64_t numel = batch.data.numel() / count;
  EXPECT_EQ(batch.labels.shape(), (Shape{count}));
  const float* data = batch.data.data<float>();
  const float* labels = batch.labels.data<float>();
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = int64_t(data[i * numel] - 1) / 1000;
    for (int64_t j = 0; j < numel; ++j) EXPECT_EQ(data[i * numel + j], float(1000 * index + j + 1));
    EXPECT_EQ(labels[i], float((3 * index) % 11));
    indices.push_back(index);
  }
  return indices;
}

// The indices of the next `batches` batches, in order.
std::vector<int64_t> take(DataLoader& loader, int64_t batches) {
  std::vector<int64_t> all;
  for (int64_t b = 0; b < batches; ++b) {
    const std::vector<int64_t> indices = sample_indices(loader.next());
    all.insert(all.end(), indices.begin(), indices.end());
  }
  return all;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

TEST(DataLoaderOrder, InOrderPassWithSmallerLastBatch) {
  auto dataset = std::make_shared<IndexDataset>(23);
  DataLoader loader(dataset, options(5, false, false));
  ASSERT_EQ(loader.batches_per_epoch(), 5);
  std::vector<int64_t> sizes;
  std::vector<int64_t> all;
  for (int b = 0; b < 5; ++b) {
    const Batch batch = loader.next();
    EXPECT_EQ(batch.epoch, 0);
    EXPECT_EQ(batch.index_in_epoch, b);
    EXPECT_EQ(batch.data.shape(), (Shape{batch.data.dim(0), 2, 3}));
    sizes.push_back(batch.data.dim(0));
    const auto indices = sample_indices(batch);
    all.insert(all.end(), indices.begin(), indices.end());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 5, 5, 5, 3}));
  EXPECT_EQ(all, iota(0, 23));
  // The stream runs on into the next epoch, aligned: a second pass sees the same samples.
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_EQ(take(loader, 5), iota(0, 23));
}

TEST(DataLoaderOrder, ShuffleVisitsEverySampleOncePerEpoch) {
  auto dataset = std::make_shared<IndexDataset>(23);
  DataLoader loader(dataset, options(4, true, false, 7));
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> order = take(loader, loader.batches_per_epoch());
    epochs.push_back(order);
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, iota(0, 23)) << "epoch " << e;
  }
  EXPECT_NE(epochs[0], iota(0, 23));
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  EXPECT_EQ(epochs[0], epoch_order(23, 7, 0));
  EXPECT_EQ(epochs[2], epoch_order(23, 7, 2));
}

TEST(DataLoaderOrder, SeedDecidesTheOrder) {
  auto dataset = std::make_shared<IndexDataset>(40);
  DataLoader a(dataset, options(8, true, true, 3));
  DataLoader b(dataset, options(8, true, true, 3));
  DataLoader c(dataset, options(8, true, true, 4));
  const auto from_a = take(a, 10);
  EXPECT_EQ(from_a, take(b, 10));
  EXPECT_NE(from_a, take(c, 10));
}

TEST(DataLoaderOrder, SameStreamForAnyThreadingAndPrefetch) {
  auto dataset = std::make_shared<IndexDataset>(29, Shape{3});
  DataLoader reference(dataset, options(4, true, true, 11, 0));
  const auto expected = take(reference, 7 * 3);
  for (int workers : {1, 3}) {
    for (int prefetch : {1, 4}) {
      DataLoader loader(dataset, options(4, true, true, 11, workers, prefetch));
      EXPECT_EQ(take(loader, 7 * 3), expected) << workers << " workers, prefetch " << prefetch;
    }
  }
}

TEST(DataLoaderOrder, DropLastSkipsThePartialBatch) {
  auto dataset = std::make_shared<IndexDataset>(23);
  DataLoader in_order(dataset, options(5, false, true));
  ASSERT_EQ(in_order.batches_per_epoch(), 4);
  EXPECT_EQ(take(in_order, 4), iota(0, 20));
  const Batch next = in_order.next();
  EXPECT_EQ(next.epoch, 1);
  EXPECT_EQ(next.index_in_epoch, 0);
  EXPECT_EQ(sample_indices(next), iota(0, 5));

  DataLoader shuffled(dataset, options(5, true, true, 2));
  const auto first = take(shuffled, 4);
  const std::set<int64_t> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), 20u);
  const auto order = epoch_order(23, 2, 0);
  EXPECT_EQ(first, std::vector<int64_t>(order.begin(), order.begin() + 20));
}

TEST(DataLoaderOrder, SeekResumesTheStream) {
  auto dataset = std::make_shared<IndexDataset>(17);
  DataLoader straight(dataset, options(3, true, false, 5));
  ASSERT_EQ(straight.batches_per_epoch(), 6);
  take(straight, 2 * 6 + 4);
  const auto expected = take(straight, 3);

  DataLoader resumed(dataset, options(3, true, false, 5, 2, 3));
  take(resumed, 1);  // batches prepared for the old position must be dropped
  resumed.seek(2, 4);
  EXPECT_EQ(resumed.epoch(), 2);
  EXPECT_EQ(resumed.index_in_epoch(), 4);
  const Batch batch = resumed.next();
  EXPECT_EQ(batch.epoch, 2);
  EXPECT_EQ(batch.index_in_epoch, 4);
  auto got = sample_indices(batch);
  const auto rest = take(resumed, 2);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, expected);

  resumed.start_epoch(0);
  const auto order = epoch_order(17, 5, 0);
  EXPECT_EQ(sample_indices(resumed.next()), std::vector<int64_t>(order.begin(), order.begin() + 3));
  EXPECT_THROW(resumed.seek(0, 6), Error);
}

// A dataset that counts how often each sample is read.
class CountingDataset : public IndexDataset {
 public:
  explicit CountingDataset(int64_t size) : IndexDataset(size), reads_(size_t(size)) {}
  void read_sample(int64_t index, Image& out) const override {
    IndexDataset::read_sample(index, out);
    ++reads_[size_t(index)];
    ++total_;
  }
  int reads(int64_t index) const { return reads_[size_t(index)]; }
  int total() const { return total_; }

 private:
  mutable std::vector<std::atomic<int>> reads_;
  mutable std::atomic<int> total_{0};
};

// Training builds its nets after the loader, whose workers meanwhile prepare the first batches,
// and then seeks to the start: those batches are kept, not read again.
TEST(DataLoaderOrder, SeekToWhereTheStreamIsKeepsPreparedBatches) {
  auto dataset = std::make_shared<CountingDataset>(30);
  DataLoader loader(dataset, options(3, false, false, 1, 1, 2));  // prepares 3 batches ahead
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (dataset->total() < 9 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(dataset->total(), 9) << "the worker did not prepare 3 batches ahead";
  loader.seek(0, 0);
  EXPECT_EQ(take(loader, 3), iota(0, 9));
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(dataset->reads(i), 1) << "sample " << i;
}

TEST(DataLoaderTransforms, AppliedInOrderToEverySample) {
  auto dataset = std::make_shared<IndexDataset>(6);  // samples 2 x 3
  DataLoaderOptions o = options(4, false, false);
  o.transforms.push_back(make_transform({"scale", {0.5f}}));
  o.transforms.push_back(make_transform({"mean", {1.0f, 3.0f}}));
  DataLoader loader(dataset, o);
  for (int b = 0; b < 2; ++b) {
    const Batch batch = loader.next();
    const float* data = batch.data.data<float>();
    for (int64_t i = 0; i < batch.data.dim(0); ++i) {
      const int64_t index = 4 * b + i;
      for (int j = 0; j < 6; ++j) {
        const float expected = float(1000 * index + j + 1) * 0.5f - (j < 3 ? 1.0f : 3.0f);
        EXPECT_EQ(data[i * 6 + j], expected) << "sample " << index << " pixel " << j;
      }
    }
  }
}

TEST(DataLoaderErrors, BadOptionsAreErrors) {
  auto dataset = std::make_shared<IndexDataset>(10);
  EXPECT_THROW(DataLoader(dataset, options(0, false, false)), Error);
  EXPECT_THROW(DataLoader(dataset, options(11, false, true)), Error);
  EXPECT_NO_THROW(DataLoader(dataset, options(11, false, false)));
  EXPECT_THROW(DataLoader(dataset, options(2, false, false, 1, -1)), Error);
  EXPECT_THROW(DataLoader(dataset, options(2, false, false, 1, 1, 0)), Error);
  EXPECT_THROW(DataLoader(std::make_shared<IndexDataset>(0), options(2, false, false)), Error);
  DataLoaderOptions o = options(2, false, false);
  o.transforms.push_back(make_transform({"mean", {1.0f, 2.0f, 3.0f}}));  // samples have 2 channels
  EXPECT_THROW(DataLoader(dataset, o), Error);
}

TEST(DataLoaderErrors, WorkerExceptionReachesNext) {
  for (int workers : {0, 2}) {
    auto dataset = std::make_shared<IndexDataset>(20, Shape{2, 3}, 7);
    DataLoader loader(dataset, options(5, false, false, 1, workers));
    EXPECT_EQ(sample_indices(loader.next()), iota(0, 5));
    try {
      loader.next();
      FAIL() << "the failing batch did not throw";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("sample 7 is unreadable"), std::string::npos) << message;
      EXPECT_NE(message.find("epoch 0 batch 1"), std::string::npos) << message;
    }
    EXPECT_EQ(sample_indices(loader.next()), iota(10, 15)) << "the stream moves past the error";
  }
}

TEST(DataLoaderThreads, EarlyDestructionDoesNotHang) {
  const auto start = std::chrono::steady_clock::now();
  auto slow = std::make_shared<IndexDataset>(1000, Shape{4}, -1, std::chrono::microseconds(200));
  { DataLoader unused(slow, options(10, true, true, 1, 2, 4)); }
  {
    DataLoader loader(slow, options(10, true, true, 1, 2, 4));
    loader.next();
    loader.seek(5, 3);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
}

TEST(DataLoaderThreads, WaitTimeIsCounted) {
  // Each batch takes about 4 x 1 ms to assemble and the consumer does nothing: it waits.
  auto slow = std::make_shared<IndexDataset>(40, Shape{4}, -1, std::chrono::microseconds(1000));
  DataLoader loader(slow, options(4, false, true, 1, 1, 2));
  EXPECT_EQ(loader.wait_seconds(), 0.0);
  take(loader, 5);
  EXPECT_GT(loader.wait_seconds(), 0.01);
  EXPECT_LT(loader.wait_seconds(), 1.0);
}

// Random crops and flips depend on (seed, epoch, sample) only: the same batches for 0, 1 or 3
// workers, different augmentations in another epoch or with another seed.
TEST(DataLoaderTransforms, SameAugmentationForAnyWorkerCount) {
  auto dataset = std::make_shared<IndexDataset>(21, Shape{1, 4, 5});
  auto make = [&](int workers, uint64_t seed) {
    DataLoaderOptions o = options(4, true, true, seed, workers, 2);
    o.transforms.push_back(
        make_transform({"random_crop", {}, {{"size", {3.0f, 4.0f}}, {"padding", {1.0f}}}}));
    o.transforms.push_back(make_transform({"horizontal_flip", {}}));
    return std::make_unique<DataLoader>(dataset, o);
  };
  auto batches = [](DataLoader& loader, int count) {
    std::vector<std::vector<float>> out;
    for (int b = 0; b < count; ++b) {
      const Batch batch = loader.next();
      EXPECT_EQ(batch.data.shape(), (Shape{4, 1, 3, 4}));
      std::vector<float> values = batch.data.to_vector();
      const std::vector<float> labels = batch.labels.to_vector();
      values.insert(values.end(), labels.begin(), labels.end());
      out.push_back(values);
    }
    return out;
  };
  const auto reference = batches(*make(0, 9), 10);  // two epochs of 5 batches
  EXPECT_EQ(batches(*make(1, 9), 10), reference);
  EXPECT_EQ(batches(*make(3, 9), 10), reference);
  EXPECT_NE(batches(*make(2, 10), 10), reference);
  // Epoch 1 shows the same samples with other crops: compare each sample's pixels by index.
  auto loader = make(2, 9);
  std::map<int64_t, std::vector<float>> first_epoch;
  int64_t differ = 0;
  for (int e = 0; e < 2; ++e) {
    for (int b = 0; b < 5; ++b) {
      const Batch batch = loader->next();
      const std::vector<float> values = batch.data.to_vector();
      for (int64_t i = 0; i < 4; ++i) {
        const std::vector<float> sample(values.begin() + i * 12, values.begin() + i * 12 + 12);
        const float top_value = *std::max_element(sample.begin(), sample.end());
        const int64_t index = int64_t(top_value - 1) / 1000;
        if (e == 0) first_epoch[index] = sample;
        if (e == 1 && first_epoch.count(index) && first_epoch[index] != sample) ++differ;
      }
    }
  }
  EXPECT_GT(differ, 5);
}

TEST(DataLoaderTransforms, ShapeChangesAreBatched) {
  auto dataset = std::make_shared<IndexDataset>(5, Shape{1, 4, 5});
  DataLoaderOptions o = options(2, false, false);
  o.transforms.push_back(make_transform({"center_crop", {2.0f, 3.0f}}));
  DataLoader loader(dataset, o);
  EXPECT_EQ(loader.sample_shape(), (Shape{1, 2, 3}));
  const Batch batch = loader.next();
  EXPECT_EQ(batch.data.shape(), (Shape{2, 1, 2, 3}));
  // Sample 1, rows 1..2, columns 1..3 of x[h, w] = 1000 + 5 h + w + 1.
  const std::vector<float> values = batch.data.to_vector();
  EXPECT_EQ(std::vector<float>(values.begin() + 6, values.end()),
            (std::vector<float>{1007, 1008, 1009, 1012, 1013, 1014}));
}

// skip_bad: the bad sample gives way to the next one of the order; it is counted once per
// epoch and reported when the epoch's last batch is handed out.
TEST(DataLoaderErrors, SkipBadReplacesAndReports) {
  for (int workers : {0, 2}) {
    auto dataset = std::make_shared<IndexDataset>(10, Shape{2, 3}, 3);
    DataLoaderOptions o = options(4, false, true, 1, workers);
    o.skip_bad = true;
    std::vector<std::string> reports;
    o.report = [&](const std::string& line) { reports.push_back(line); };
    DataLoader loader(dataset, o);
    EXPECT_EQ(sample_indices(loader.next()), (std::vector<int64_t>{0, 1, 2, 4}));
    EXPECT_EQ(loader.skipped_samples(), 1);
    EXPECT_TRUE(reports.empty());
    EXPECT_EQ(sample_indices(loader.next()), iota(4, 8));
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_CONTAINS(reports[0], "epoch 0: skipped 1 bad sample");
    EXPECT_CONTAINS(reports[0], "sample 3 is unreadable");
    loader.next();
    loader.next();
    EXPECT_EQ(reports.size(), 2u);
    EXPECT_EQ(loader.skipped_samples(), 2);
  }
}

}  // namespace
}  // namespace crema::data
