#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/random.h"

namespace crema::data {
namespace {

// SplitMix64's finalizer: spreads (seed, epoch) over all 64 bits so that neighbouring seeds or
// epochs give unrelated generator states.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(size, 0)));
  std::iota(order.begin(), order.end(), int64_t(0));
  Random random(mix64(seed ^ mix64(uint64_t(epoch))));
  for (int64_t i = size - 1; i > 0; --i) {
    std::swap(order[size_t(i)], order[size_t(random.below(uint64_t(i) + 1))]);
  }
  return order;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  CREMA_CHECK(dataset_ != nullptr, "DataLoader needs a dataset");
  const std::string what = "data loader over " + dataset_->description();
  if (options_.batch_size < 1) {
    throw Error(what + ": batch_size is " + std::to_string(options_.batch_size) +
                ", must be at least 1");
  }
  if (options_.prefetch < 1) {
    throw Error(what + ": prefetch is " + std::to_string(options_.prefetch) +
                ", must be at least 1");
  }
  if (options_.num_workers < 0) {
    throw Error(what + ": num_workers is " + std::to_string(options_.num_workers) +
                ", must be 0 (no threads) or more");
  }
  const int64_t size = dataset_->size();
  if (size == 0) throw Error(what + ": the dataset is empty");
  batches_per_epoch_ = options_.drop_last ? size / options_.batch_size
                                          : (size + options_.batch_size - 1) / options_.batch_size;
  if (batches_per_epoch_ == 0) {
    throw Error(what + ": batch_size " + std::to_string(options_.batch_size) + " exceeds the " +
                std::to_string(size) +
                " samples, so drop_last leaves no batch; lower batch_size or unset drop_last");
  }
  for (const auto& transform : options_.transforms) {
    CREMA_CHECK(transform != nullptr, "null transform given to the data loader");
    transform->check(dataset_->sample_shape());
  }
  for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::order_locked(int64_t epoch) {
  auto found = orders_.find(epoch);
  if (found != orders_.end()) return found->second;
  // Epochs behind the consumer are done with; workers still using one hold their own reference.
  orders_.erase(orders_.begin(), orders_.lower_bound(next_take_ / batches_per_epoch_));
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = epoch_order(dataset_->size(), options_.seed, epoch);
  } else {
    order.resize(size_t(dataset_->size()));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  auto shared = std::make_shared<const std::vector<int64_t>>(std::move(order));
  orders_.emplace(epoch, shared);
  return shared;
}

DataLoader::Result DataLoader::assemble(int64_t position, const std::vector<int64_t>& order) const {
  Result result;
  Batch& batch = result.batch;
  batch.epoch = position / batches_per_epoch_;
  batch.index_in_epoch = position % batches_per_epoch_;
  try {
    const Shape& sample_shape = dataset_->sample_shape();
    const int64_t sample_numel = dataset_->sample_numel();
    const int64_t first = batch.index_in_epoch * options_.batch_size;
    const int64_t count = std::min(options_.batch_size, dataset_->size() - first);

    Shape data_shape = {count};
    data_shape.insert(data_shape.end(), sample_shape.begin(), sample_shape.end());
    batch.data = Tensor(data_shape, DType::f32, Device::cpu(), options_.allocator);
    batch.labels = Tensor({count}, DType::f32, Device::cpu(), options_.allocator);
    float* data = batch.data.data<float>();      // [B, sample_shape...]
    float* labels = batch.labels.data<float>();  // [B]
    for (int64_t i = 0; i < count; ++i) {
      const int64_t index = order[size_t(first + i)];
      float* sample = data + i * sample_numel;
      dataset_->read_sample(index, sample);
      for (const auto& transform : options_.transforms) transform->apply(sample, sample_shape);
      labels[i] = float(dataset_->label(index));
    }
  } catch (...) {
    result.error = std::current_exception();
  }
  return result;
}

void DataLoader::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    space_cv_.wait(lock, [this] { return stop_ || next_claim_ < next_take_ + options_.prefetch; });
    if (stop_) return;
    const int64_t position = next_claim_++;
    const uint64_t generation = generation_;
    const auto order = order_locked(position / batches_per_epoch_);
    lock.unlock();
    Result result = assemble(position, *order);
    lock.lock();
    if (generation != generation_) continue;  // seek() moved the stream meanwhile
    ready_.emplace(position, std::move(result));
    ready_cv_.notify_all();
  }
}

Batch DataLoader::next() {
  const auto start = std::chrono::steady_clock::now();
  Result result;
  if (workers_.empty()) {
    std::shared_ptr<const std::vector<int64_t>> order;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      order = order_locked(next_take_ / batches_per_epoch_);
    }
    result = assemble(next_take_, *order);
    ++next_take_;
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t position = next_take_;
    ready_cv_.wait(lock, [&] { return ready_.count(position) > 0; });
    auto node = ready_.extract(position);
    result = std::move(node.mapped());
    ++next_take_;
    lock.unlock();
    space_cv_.notify_all();
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (result.error) {
    const std::string where = "data loader over " + dataset_->description() + ", epoch " +
                              std::to_string(result.batch.epoch) + " batch " +
                              std::to_string(result.batch.index_in_epoch) + ": ";
    try {
      std::rethrow_exception(result.error);
    } catch (const std::exception& e) {
      throw Error(where + e.what());
    }
  }
  return std::move(result.batch);
}

void DataLoader::seek(int64_t epoch, int64_t index_in_epoch) {
  if (epoch < 0 || index_in_epoch < 0 || index_in_epoch >= batches_per_epoch_) {
    throw Error("data loader over " + dataset_->description() + ": cannot seek to epoch " +
                std::to_string(epoch) + " batch " + std::to_string(index_in_epoch) +
                " (an epoch has batches 0.." + std::to_string(batches_per_epoch_ - 1) + ")");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    ready_.clear();
    next_take_ = next_claim_ = epoch * batches_per_epoch_ + index_in_epoch;
  }
  space_cv_.notify_all();
}

int64_t DataLoader::epoch() const {
  return next_take_ / batches_per_epoch_;
}

int64_t DataLoader::index_in_epoch() const {
  return next_take_ % batches_per_epoch_;
}

}  // namespace crema::data
