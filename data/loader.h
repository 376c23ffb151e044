// DataLoader: turns a Dataset into a stream of batches, assembled ahead of time on background
// threads while the caller trains.
//
//   DataLoaderOptions options;
//   options.batch_size = 64, options.shuffle = true, options.drop_last = true;
//   DataLoader train(load_idx_dataset(images, labels), options);
//   Batch b = train.next();   // b.data [64, 1, 28, 28], b.labels [64], on the host
//
// The stream. Batches are numbered by one position p = epoch * batches_per_epoch() + index, and
// next() returns p, p + 1, p + 2, ... running from one epoch into the next without end. Batch p
// holds the samples order(epoch)[index * B, index * B + B) where order(epoch) is the identity or,
// with shuffle, a permutation drawn from (seed, epoch) alone (epoch_order below). Each sample's
// random transforms (crops, flips) draw from a Random seeded by (seed, epoch, sample index)
// alone (sample_seed). So the stream is a pure function of the options: the same on every run,
// whatever the number of workers or the thread timing, and a run resumed with seek(epoch, index)
// sees exactly the batches it would have seen. A shard (shard_rank of shard_count, for training on
// several processes) sees order(epoch) through shard_order: its batch p is its part of the
// one-process batch p of shard_count x batch_size samples.
//
// drop_last: an epoch of N samples has floor(N / B) batches and skips the N mod B left over
// (training, as PyTorch's loader with drop_last=True); otherwise ceil(N / B) batches, the last one
// smaller (testing: every sample counted once). A test pass is batches_per_epoch() calls of next()
// after start_epoch(0), or simply the next batches_per_epoch() calls: a pass stays aligned.
//
// Threads. num_workers threads (std::thread, owned by the loader) claim positions in order, read
// (decode) and transform their samples, and file the finished batch under its position. A batch
// starts by telling the dataset which samples it holds (Dataset::will_read: a packed dataset
// reads them ahead). At most
// num_workers + prefetch batches are claimed beyond the one next() waits for: every worker can be
// busy while `prefetch` finished batches wait (a window of `prefetch` alone would leave workers
// beyond the prefetch count idle), and memory stays bounded. next()
// blocks only until its own position is ready and adds that time to wait_seconds(). A worker's
// exception is kept with its batch and re-thrown by next() when that batch's turn comes. The
// destructor stops the workers (each finishes at most the batch it is on) and joins them; it
// never waits on the consumer. num_workers = 0 assembles each batch inside next() (simplest, for
// debugging). One consumer thread calls next(), seek() and wait_seconds().
//
// Soft targets and batch mixing. With target_classes K, each batch also carries targets [B, K]:
// one-hot rows (label-smoothed by batch_mix.label_smoothing). With batch_mix, the assembled batch
// is then mixed as a whole (mixup or cutmix, data/batch_mix.h), its draws from a Random seeded
// by (seed, epoch, batch index) alone (batch_seed): the same for any number of workers.
//
// decode: gpu (gpu_decode >= 0). Each worker reads its batch's files, draws every sample's
// PixelPlan (data/pixel_plan.h) from the sample's Random as the transforms would draw, and hands
// files and plans to its own GpuBatchDecoder: the same crops, flips and factors as the CPU path,
// the pixels within the decoders' and the resize's rounding (data/README.md). Files nvJPEG does
// not take are decoded by the worker on the CPU; a batch nvJPEG fails on is decoded on the CPU
// whole (its bad files then fail or are skipped as below). The transforms must all have a GPU
// form (pixel_plan_kinds()); no batch_mix; the source must read files (Dataset::read_encoded).
//
// Bad samples. A sample that cannot be read or transformed (a corrupt file, an image of the
// wrong size) is an error naming it. With skip_bad it is replaced by the next sample of the
// epoch's order that reads (deterministically), counted, and reported through `report` when the
// epoch's last batch is handed out.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "data/batch_mix.h"
#include "data/dataset.h"
#include "data/gpu_decode.h"
#include "data/transform.h"

namespace crema::data {

struct Batch {
  Tensor data;     // [B, sample_shape...] float32, transformed (and mixed), on the host
  Tensor labels;   // [B] float32: the class index as a float (Caffe's convention), never mixed
  Tensor targets;  // [B, K] float32 soft targets with target_classes K > 0, else undefined
  int64_t epoch = 0;
  int64_t index_in_epoch = 0;
};

struct DataLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 1;
  bool drop_last = false;
  int num_workers = 1;  // background threads; 0 assembles inside next()
  int prefetch = 2;     // finished batches kept ahead of the consumer, >= 1
  // Applied in order to every sample; they must bring every sample to one shape.
  std::vector<std::shared_ptr<const Transform>> transforms;
  // Let the first transform have JPEGs decoded at 1/2, 1/4 or 1/8 scale, and only the window it
  // reads, when it needs no more (resize, random_resized_crop: data/transform.h decode_plan);
  // false decodes every file whole at full size.
  bool reduced_decoding = true;
  // Soft targets: K > 0 gives each batch `targets`, the one-hot rows of its labels over K classes
  // (smoothed and mixed by batch_mix); 0: labels only.
  int64_t target_classes = 0;
  // Mixup and cutmix of each whole batch (data/batch_mix.h); needs target_classes > 0.
  std::optional<BatchMixOptions> batch_mix;
  // Replace unreadable samples instead of failing their batch (see above).
  bool skip_bad = false;
  // Receives one line per epoch that skipped samples: "epoch 3: skipped 2 bad samples ...".
  std::function<void(const std::string&)> report;
  // Training on several processes (apps/distributed/): this process is shard `shard_rank` of
  // `shard_count` and reads its part of each epoch's order (shard_order). batch_size is per shard.
  int shard_rank = 0;
  int shard_count = 1;
  // Where batch memory comes from (pinned host memory speeds up copies to a GPU); null means
  // host_allocator(). Must be thread-safe.
  Allocator* allocator = nullptr;
  // decode: gpu: the CUDA device that decodes JPEG files (nvJPEG) and runs the transforms
  // (data/gpu_decode.h); the batches' data is then in its memory. -1: the workers decode and
  // transform on the CPU.
  int gpu_decode = -1;
  // decode: gpu's nvJPEG backend (data/gpu_decode.h).
  GpuJpegBackend gpu_backend = GpuJpegBackend::automatic;
};

// The sample order of `epoch` over `size` samples with shuffling: a Fisher-Yates permutation
// driven by a Random seeded from (seed, epoch) only.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch);

// The part of an epoch's `order` that shard `rank` of `count` reads. drop_last (training): the
// epoch is cut into global batches of count * batch_size samples (the rest dropped) and shard r
// takes the r-th batch_size of each, so the shards' batch p together are batch p of the
// one-process stream of batch count * batch_size, and every shard has as many batches. Otherwise
// (testing): shard r takes the r-th of `count` contiguous ranges of nearly equal size, so every
// sample is read once, by one shard.
std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int rank, int count,
                                 int64_t batch_size, bool drop_last);

// The seed of the Random that sample `index`'s transforms draw from in `epoch`.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

// The seed of the Random that batch `index_in_epoch`'s mixing draws from in `epoch` (a stream
// apart from every sample's).
uint64_t batch_seed(uint64_t seed, int64_t epoch, int64_t index_in_epoch);

class DataLoader {
 public:
  // Throws crema::Error for a bad option (batch_size < 1, prefetch < 1, num_workers < 0), an
  // empty dataset, a drop_last epoch without a single batch, a transform that cannot apply to
  // the dataset's samples, or a bad batch_mix (check_batch_mix; none without target_classes;
  // cutmix on samples without H x W axes; a dataset of more classes than target_classes).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch of the stream; blocks until it is ready. Throws crema::Error carrying the
  // message of whatever the worker threw while assembling it (the stream then moves past it).
  Batch next();
  // Moves the stream so that next() returns batch `index_in_epoch` of `epoch`; discards batches
  // prepared for the old position. A seek to where the stream already is keeps them: the batches
  // the workers prepared while the caller built its nets are the first ones it trains on.
  void seek(int64_t epoch, int64_t index_in_epoch);
  void start_epoch(int64_t epoch) { seek(epoch, 0); }

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // The samples of this shard's epoch: batches_per_epoch() batches hold this many.
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  // The shape of one sample of a batch: the dataset's, through the transforms.
  const Shape& sample_shape() const { return sample_shape_; }
  // Samples skipped as bad (skip_bad) in the batches next() has returned.
  int64_t skipped_samples() const { return skipped_total_; }
  // Epoch and index of the batch next() will return.
  int64_t epoch() const;
  int64_t index_in_epoch() const;
  // Total seconds next() has spent waiting for batches since construction.
  double wait_seconds() const { return wait_seconds_; }
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  // A finished batch or the exception that stopped it.
  struct Result {
    Batch batch;
    std::exception_ptr error;
    std::vector<std::string> skipped;  // what was wrong with each sample skipped
  };

  // What a thread assembling batches keeps between them.
  struct WorkerState {
    Image scratch;                         // one sample at a time
    std::unique_ptr<GpuBatchDecoder> gpu;  // decode: gpu, made by the thread on first use
  };

  void worker_loop();
  // Assembles batch `position`.
  Result assemble(int64_t position, const std::vector<int64_t>& order, WorkerState& state) const;
  // Loads the sample at `slot` of `order` with `load(index)`; with skip_bad a sample that throws
  // gives way to the next ones of the order (recorded in result.skipped). Returns the index
  // loaded.
  int64_t load_or_skip(const std::vector<int64_t>& order, int64_t slot, Result& result,
                       const std::function<void(int64_t index)>& load) const;
  // decode: gpu: the batch's data from samples order[first, first + count) (labels set).
  void assemble_gpu(Result& result, const std::vector<int64_t>& order, int64_t first,
                    WorkerState& state) const;
  // decode: gpu: sample `index`'s file and plan; decoded on the CPU when `cpu_only` or when the
  // GPU decoder does not take it. Throws naming the sample.
  void prepare_gpu_sample(int64_t epoch, int64_t index, GpuSample& sample, GpuBatchDecoder& gpu,
                          bool cpu_only) const;
  // decode: gpu: throws what's wrong with the options for it.
  void check_gpu_decode(const std::string& what) const;
  // With target_classes, the batch's targets from its labels, then batch_mix.
  void make_targets(Batch& batch) const;
  // Reads and transforms sample `index` of `epoch` into `image`; throws naming the sample. The
  // random transforms draw from a Random seeded for the sample, the others get `fixed`.
  void load_sample(int64_t epoch, int64_t index, Image& image, Random& fixed) const;
  // Counts a returned batch's skipped samples and reports them at the end of its epoch.
  void account_skipped(const Result& result);
  // The order of `epoch`, cached; mutex_ must be held.
  std::shared_ptr<const std::vector<int64_t>> order_locked(int64_t epoch);

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t batches_per_epoch_ = 0;
  int64_t samples_per_epoch_ = 0;
  Shape sample_shape_;
  bool random_transforms_ = false;  // some transform draws random numbers
  double wait_seconds_ = 0.0;
  WorkerState inline_state_;  // next()'s when num_workers = 0
  int64_t skipped_in_epoch_ = 0, skipped_total_ = 0;
  std::string first_skipped_;

  std::mutex mutex_;                  // guards everything below
  std::condition_variable ready_cv_;  // a batch was filed
  std::condition_variable space_cv_;  // a position may be claimed, or stop_ was set
  int64_t next_take_ = 0;             // position next() returns
  int64_t next_claim_ = 0;            // position the next idle worker assembles
  uint64_t generation_ = 0;           // bumped by seek(); older work is dropped
  bool stop_ = false;
  std::map<int64_t, Result> ready_;  // finished batches by position
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;  // by epoch

  std::vector<std::thread> workers_;  // last: started after every member above exists
};

}  // namespace crema::data
