// crema bench-loader: the data loader's throughput alone. For each worker count the loader of
// data.<split> is built as training builds it (same source, transforms, batch size, prefetch)
// and next() is called back to back, so the time is the time to read, decode and transform:
// images/s of decoding + augmentation + batch assembly, the consumer doing nothing else.
// Any source times the same way; a folder's packed form (`crema pack`) by pointing the source at
// it: --set data.train.source.format=packed --set data.train.source.root=DIR.
//
// --decode gpu (data.<split>.decode: gpu) times nvJPEG and the CUDA transforms on GPU 0: each
// batch handed out is complete in GPU memory (data/gpu_decode.h); the workers then only read
// files, draw the plans and decode what nvJPEG does not take.
//
// Batch memory comes from a cache of host blocks, as in training on a GPU (the Context's pinned
// staging allocator caches too, core/context.h): a batch's 38 MB (64 x 3 x 224 x 224 floats) is
// then reused instead of page-faulted in afresh, which cost as much as decoding and augmenting
// the photos on a 2-core machine (data/README.md, "Photo-like JPEGs"). Training on the CPU
// allocates each batch afresh.
#include <chrono>
#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

#include "apps/data_commands.h"
#include "apps/session.h"
#include "apps/training/data_config.h"
#include "core/caching_allocator.h"
#include "core/config.h"
#include "core/error.h"

namespace crema {

std::vector<double> bench_loader_command(const BenchLoaderOptions& options, std::ostream& out) {
  if (options.batches < 1) throw Error("--batches must be at least 1");
  if (options.split != "train" && options.split != "test") {
    throw Error("--split must be train or test, got '" + options.split + "'");
  }
  // Declared before the loaders, which return their batches to it.
  CachingAllocator batch_memory(
      [](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }, std::free);
  std::vector<double> rates;
  for (int workers : options.workers) {
    if (workers < 0) throw Error("--workers: a worker count must be 0 or more");
    std::vector<std::string> overrides = options.overrides;
    overrides.push_back(fmt::format("++data.{}.workers={}", options.split, workers));
    if (!options.decode.empty()) {
      overrides.push_back(fmt::format("++data.{}.decode={}", options.split, options.decode));
    }
    const ConfigNode root = load_run_config(options.config, overrides);
    const auto built = std::chrono::steady_clock::now();
    const auto loader = make_loader(root.at("data"), options.split,
                                    uint64_t(root.get<int64_t>("seed", 1)), &batch_memory, nullptr,
                                    root.has("model") ? soft_target_classes(root.at("model")) : 0);
    if (rates.empty()) {
      const auto& loader_options = loader->options();
      std::string transforms;
      for (const auto& transform : loader_options.transforms) {
        transforms += (transforms.empty() ? "" : ", ") + transform->description();
      }
      out << fmt::format(
          "loader of data.{}: {}, batch {}, {} batches timed after one untimed, decoded on {}\n",
          options.split, loader->dataset().description(), loader_options.batch_size,
          options.batches,
          loader_options.gpu_decode >= 0
              ? fmt::format("cuda:{} (nvJPEG)", loader_options.gpu_decode)
              : std::string("the CPU"));
      out << "transforms: " << (transforms.empty() ? "none" : transforms) << "\n";
      out << "images/s: images read, decoded, augmented and batched per second, the consumer "
             "idle; first ms: from building the loader to its first batch (the workers' start)\n";
      out << fmt::format("{:>8} {:>12} {:>12} {:>12}\n", "workers", "images/s", "ms/batch",
                         "first ms");
    }
    loader->next();  // starts the workers and fills the prefetch queue
    const double first_ms =
        1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count();
    int64_t images = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < options.batches; ++b) images += loader->next().data.dim(0);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(double(images) / seconds);
    out << fmt::format("{:>8} {:>12.0f} {:>12.3f} {:>12.1f}\n", workers, rates.back(),
                       1e3 * seconds / double(options.batches), first_ms)
        << std::flush;
  }
  return rates;
}

}  // namespace crema
