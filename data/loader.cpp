#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <utility>

#ifdef __linux__
#include <pthread.h>
#endif

#include "core/error.h"
#include "core/random.h"
#include "data/jpeg.h"

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

std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int rank, int count,
                                 int64_t batch_size, bool drop_last) {
  const int64_t n = int64_t(order.size());
  std::vector<int64_t> shard;
  if (drop_last) {
    const int64_t global = batch_size * count;
    for (int64_t first = 0; first + global <= n; first += global) {
      const auto begin = order.begin() + first + rank * batch_size;
      shard.insert(shard.end(), begin, begin + batch_size);
    }
  } else {
    shard.assign(order.begin() + n * rank / count, order.begin() + n * (rank + 1) / count);
  }
  return shard;
}

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return mix64(mix64(mix64(seed) ^ uint64_t(epoch)) ^ uint64_t(index));
}

uint64_t batch_seed(uint64_t seed, int64_t epoch, int64_t index_in_epoch) {
  // A salt keeps batch b's stream apart from sample b's (sample_seed).
  return mix64(sample_seed(seed ^ 0x6D69787570ull, epoch, index_in_epoch));
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
  if (options_.shard_count < 1 || options_.shard_rank < 0 ||
      options_.shard_rank >= options_.shard_count) {
    throw Error(what + ": shard " + std::to_string(options_.shard_rank) + " of " +
                std::to_string(options_.shard_count) + " does not exist");
  }
  const int64_t global_batch = options_.batch_size * options_.shard_count;
  if (options_.drop_last && size < global_batch) {
    throw Error(what + ": batch_size " + std::to_string(options_.batch_size) +
                (options_.shard_count > 1 ? " x " + std::to_string(options_.shard_count) + " ranks"
                                          : std::string()) +
                " exceeds the " + std::to_string(size) +
                " samples, so drop_last leaves no batch; lower batch_size or unset drop_last");
  }
  if (size < options_.shard_count) {
    throw Error(what + ": " + std::to_string(size) + " samples cannot be shared by " +
                std::to_string(options_.shard_count) + " ranks");
  }
  const int64_t r = options_.shard_rank, n = options_.shard_count;
  samples_per_epoch_ = options_.drop_last ? size / global_batch * options_.batch_size
                                          : size * (r + 1) / n - size * r / n;
  batches_per_epoch_ = (samples_per_epoch_ + options_.batch_size - 1) / options_.batch_size;
  sample_shape_ = dataset_->sample_shape();
  for (const auto& transform : options_.transforms) {
    CREMA_CHECK(transform != nullptr, "null transform given to the data loader");
    random_transforms_ = random_transforms_ || transform->is_random();
    try {
      sample_shape_ = transform->output_shape(sample_shape_);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
  }
  if (options_.target_classes < 0) {
    throw Error(what + ": target_classes is " + std::to_string(options_.target_classes) +
                ", must be 0 (labels only) or the number of classes");
  }
  if (options_.target_classes > 0 && dataset_->num_classes() > options_.target_classes) {
    throw Error(what + " has " + std::to_string(dataset_->num_classes()) +
                " classes, more than the soft targets' " + std::to_string(options_.target_classes) +
                " (model.inputs.label)");
  }
  if (options_.batch_mix) {
    const BatchMixOptions& mix = *options_.batch_mix;
    if (options_.target_classes == 0) {
      throw Error(what +
                  ": batch_mix makes soft targets: the net's label input must be one row of "
                  "class weights, model.inputs.label: [K] for K classes");
    }
    check_batch_mix(mix);
    if (mix.cutmix_alpha > 0 && sample_shape_.size() < 2) {
      throw Error(what + ": batch_mix.cutmix_alpha needs samples with H x W axes, got " +
                  shape_str(sample_shape_));
    }
  }
  if (options_.gpu_decode >= 0) check_gpu_decode(what);
  for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::check_gpu_decode(const std::string& what) const {
  if (!gpu_decoding_built()) {
    make_gpu_batch_decoder(options_.gpu_decode, 3);  // throws, saying how to get nvJPEG
  }
  if (options_.batch_mix) {
    throw Error(what + ": batch_mix mixes batches on the CPU; decode: gpu leaves it out");
  }
  const Shape& input = dataset_->sample_shape();
  if (input.size() != 3 || (input[0] != 1 && input[0] != 3)) {
    throw Error(what + ": decode: gpu decodes 1- or 3-channel images, not samples of shape " +
                shape_str(input));
  }
  PixelPlan plan = identity_plan(input[0], {input[1], input[2]});
  Random random(0);
  try {
    for (const auto& transform : options_.transforms) transform->plan(plan, random);
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  EncodedSample file;
  bool has_files = false;
  try {
    has_files = dataset_->read_encoded(0, file);
  } catch (const Error&) {
    has_files = true;  // a file that cannot be read: reported when its batch is assembled
  }
  if (!has_files) {
    throw Error(what +
                ": decode: gpu decodes image files (an image folder, a list or a packed "
                "dataset); this source holds decoded pixels");
  }
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
  if (options_.shard_count > 1) {
    order = shard_order(order, options_.shard_rank, options_.shard_count, options_.batch_size,
                        options_.drop_last);
  }
  auto shared = std::make_shared<const std::vector<int64_t>>(std::move(order));
  orders_.emplace(epoch, shared);
  return shared;
}

void DataLoader::load_sample(int64_t epoch, int64_t index, Image& image, Random& fixed) const {
  std::optional<Random> seeded;
  if (random_transforms_) seeded.emplace(sample_seed(options_.seed, epoch, index));
  Random& random = seeded ? *seeded : fixed;
  // Its errors name the file. The first transform may let the decoder shrink the image; it is
  // asked with a copy of the generator it will draw from.
  if (options_.reduced_decoding && !options_.transforms.empty()) {
    const Transform& first = *options_.transforms.front();
    dataset_->read_sample_reduced(index, image,
                                  [&](Size2 full) { return first.decode_plan(full, random); });
  } else {
    dataset_->read_sample(index, image);
  }
  try {
    for (const auto& transform : options_.transforms) transform->apply(image, random);
  } catch (const Error& e) {
    throw Error(dataset_->sample_name(index) + ": " + e.what());
  }
  if (image.shape != sample_shape_) {
    throw Error(dataset_->sample_name(index) + " is " + shape_str(image.shape) +
                (options_.transforms.empty() ? "" : " after the transforms") +
                ", but the batches hold " + shape_str(sample_shape_) +
                " (the first sample's shape" +
                (options_.transforms.empty() ? "" : " through the transforms") +
                "); images of different sizes need a resize or crop transform");
  }
}

int64_t DataLoader::load_or_skip(const std::vector<int64_t>& order, int64_t slot, Result& result,
                                 const std::function<void(int64_t index)>& load) const {
  int64_t index = order[size_t(slot)];
  if (!options_.skip_bad) {
    load(index);
    return index;
  }
  // Bad samples give way to the next ones of the epoch's order; only a sample's failure at its
  // own place is counted, so each bad sample is counted once per epoch.
  const int64_t size = int64_t(order.size());
  constexpr int64_t kMaxAttempts = 1000;
  for (int64_t attempt = 0;; ++attempt) {
    try {
      load(index);
      return index;
    } catch (const Error& e) {
      if (attempt == 0) result.skipped.push_back(e.what());
      if (attempt + 1 >= std::min(size, kMaxAttempts)) {
        throw Error("skip_bad: " + std::to_string(attempt + 1) +
                    " samples in a row are bad; is the source right? The last: " + e.what());
      }
      index = order[size_t((slot + attempt + 1) % size)];
    }
  }
}

DataLoader::Result DataLoader::assemble(int64_t position, const std::vector<int64_t>& order,
                                        WorkerState& state) const {
  Result result;
  Batch& batch = result.batch;
  batch.epoch = position / batches_per_epoch_;
  batch.index_in_epoch = position % batches_per_epoch_;
  try {
    const int64_t sample_numel = shape_numel(sample_shape_);
    const int64_t first = batch.index_in_epoch * options_.batch_size;
    // The order is this shard's (shard_order) when training on several processes.
    const int64_t count = std::min(options_.batch_size, int64_t(order.size()) - first);
    batch.labels = Tensor({count}, DType::f32, Device::cpu(), options_.allocator);
    dataset_->will_read(order.data() + first, count);
    if (options_.gpu_decode >= 0) {
      assemble_gpu(result, order, first, state);
    } else {
      // Handed to transforms that draw nothing: seeding a generator per sample costs a
      // microsecond.
      Random fixed(0);
      Shape data_shape = {count};
      data_shape.insert(data_shape.end(), sample_shape_.begin(), sample_shape_.end());
      batch.data = Tensor(data_shape, DType::f32, Device::cpu(), options_.allocator);
      float* data = batch.data.data<float>();      // [B, sample_shape...]
      float* labels = batch.labels.data<float>();  // [B]
      for (int64_t i = 0; i < count; ++i) {
        const int64_t index = load_or_skip(order, first + i, result, [&](int64_t index) {
          load_sample(batch.epoch, index, state.scratch, fixed);
        });
        std::copy(state.scratch.pixels.begin(), state.scratch.pixels.end(),
                  data + i * sample_numel);
        labels[i] = float(dataset_->label(index));
      }
    }
    make_targets(batch);
  } catch (...) {
    result.error = std::current_exception();
  }
  return result;
}

void DataLoader::prepare_gpu_sample(int64_t epoch, int64_t index, GpuSample& sample,
                                    GpuBatchDecoder& gpu, bool cpu_only) const {
  EncodedSample& file = sample.file;
  CREMA_CHECK(dataset_->read_encoded(index, file),
              dataset_->sample_name(index) + " has no file for decode: gpu");
  std::optional<Size2> size;
  if (!cpu_only && is_jpeg(file.bytes.data(), file.bytes.size())) {
    size = gpu.accepts(file.bytes.data(), file.bytes.size());
  }
  sample.on_gpu = size.has_value();
  if (sample.on_gpu) {
    check_image_pixels(size->width, size->height, file.max_pixels, file.name);
  } else {
    DecodeOptions options;
    options.max_pixels = file.max_pixels;
    decode_image(file.bytes.data(), file.bytes.size(), file.channels, file.name, sample.decoded,
                 options);
    size = Size2{sample.decoded.height(), sample.decoded.width()};
  }
  // The generator load_sample would hand the transforms; they draw the same from it here.
  Random random(random_transforms_ ? sample_seed(options_.seed, epoch, index) : 0);
  sample.plan = identity_plan(file.channels, *size);
  try {
    for (const auto& transform : options_.transforms) transform->plan(sample.plan, random);
  } catch (const Error& e) {
    throw Error(dataset_->sample_name(index) + ": " + e.what());
  }
  const Shape shape = {sample.plan.channels, sample.plan.height(), sample.plan.width()};
  if (shape != sample_shape_) {
    throw Error(dataset_->sample_name(index) + " is " + shape_str(shape) +
                " after the transforms, but the batches hold " + shape_str(sample_shape_) +
                " (the first sample's shape through the transforms); images of different sizes "
                "need a resize or crop transform");
  }
}

void DataLoader::assemble_gpu(Result& result, const std::vector<int64_t>& order, int64_t first,
                              WorkerState& state) const {
  Batch& batch = result.batch;
  const int64_t count = batch.labels.numel();
  if (!state.gpu) {
    state.gpu =
        make_gpu_batch_decoder(options_.gpu_decode, int(sample_shape_.at(0)), options_.gpu_backend);
  }
  std::vector<GpuSample> samples(static_cast<size_t>(count));
  auto prepare = [&](bool cpu_only) {
    float* labels = batch.labels.data<float>();  // [B]
    for (int64_t i = 0; i < count; ++i) {
      const int64_t index = load_or_skip(order, first + i, result, [&](int64_t index) {
        prepare_gpu_sample(batch.epoch, index, samples[size_t(i)], *state.gpu, cpu_only);
      });
      labels[i] = float(dataset_->label(index));
    }
  };
  prepare(false);
  Shape data_shape = {count};
  data_shape.insert(data_shape.end(), sample_shape_.begin(), sample_shape_.end());
  batch.data = Tensor(data_shape, DType::f32, Device::cuda(options_.gpu_decode),
                      &gpu_batch_allocator(options_.gpu_decode));
  if (state.gpu->run(samples, batch.data.data<float>())) return;
  // nvJPEG failed on some file: the CPU decodes them all and names (or skips) the bad ones.
  result.skipped.clear();
  prepare(true);
  CREMA_CHECK(state.gpu->run(samples, batch.data.data<float>()),
              "the GPU decoder failed on a batch decoded on the CPU");
}

void DataLoader::make_targets(Batch& batch) const {
  const int64_t K = options_.target_classes;
  if (K == 0) return;
  const int64_t count = batch.labels.numel();
  const BatchMixOptions* mix = options_.batch_mix ? &*options_.batch_mix : nullptr;
  batch.targets = Tensor({count, K}, DType::f32, Device::cpu(), options_.allocator);
  float* targets = batch.targets.data<float>();  // [B, K]
  one_hot_targets(batch.labels.data<float>(), count, K, mix ? mix->label_smoothing : 0.0, targets);
  if (mix == nullptr) return;
  const size_t rank = sample_shape_.size();
  const int64_t H = rank >= 2 ? sample_shape_[rank - 2] : 1,
                W = rank >= 1 ? sample_shape_.back() : 1;
  Random random(batch_seed(options_.seed, batch.epoch, batch.index_in_epoch));
  apply_batch_mix(draw_batch_mix(*mix, H, W, random), sample_shape_, count,
                  batch.data.data<float>(), K, targets);
}

void DataLoader::account_skipped(const Result& result) {
  if (!result.skipped.empty() && skipped_in_epoch_ == 0) first_skipped_ = result.skipped[0];
  skipped_in_epoch_ += int64_t(result.skipped.size());
  skipped_total_ += int64_t(result.skipped.size());
  if (result.batch.index_in_epoch + 1 < batches_per_epoch_ || skipped_in_epoch_ == 0) return;
  if (options_.report) {
    options_.report("data loader over " + dataset_->description() + ", epoch " +
                    std::to_string(result.batch.epoch) + ": skipped " +
                    std::to_string(skipped_in_epoch_) +
                    " bad sample(s) (skip_bad); the first: " + first_skipped_);
  }
  skipped_in_epoch_ = 0;
  first_skipped_.clear();
}

void DataLoader::worker_loop() {
#ifdef __linux__
  pthread_setname_np(pthread_self(), "crema-loader");  // as top -H and debuggers list it
#endif
  WorkerState state;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    space_cv_.wait(lock, [this] {
      return stop_ || next_claim_ < next_take_ + options_.num_workers + options_.prefetch;
    });
    if (stop_) return;
    const int64_t position = next_claim_++;
    const uint64_t generation = generation_;
    const auto order = order_locked(position / batches_per_epoch_);
    lock.unlock();
    Result result = assemble(position, *order, state);
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
    result = assemble(next_take_, *order, inline_state_);
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
  account_skipped(result);

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
    if (next_take_ == epoch * batches_per_epoch_ + index_in_epoch) return;
    ++generation_;
    ready_.clear();
    skipped_in_epoch_ = 0;
    first_skipped_.clear();
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
