// crema bench-loader: the data loader's throughput alone. For each worker count the loader of
// data.<split> is built as training builds it (same source, transforms, batch size, prefetch)
// and next() is called back to back, so the time is the time to read, decode and transform.
// Any source times the same way; a folder's packed form (`crema pack`) by pointing the source at
// it: --set data.train.source.format=packed --set data.train.source.root=DIR.
#include <chrono>
#include <ostream>

#include <fmt/format.h>

#include "apps/data_commands.h"
#include "apps/session.h"
#include "apps/training/data_config.h"
#include "core/config.h"
#include "core/error.h"

namespace crema {

std::vector<double> bench_loader_command(const BenchLoaderOptions& options, std::ostream& out) {
  if (options.batches < 1) throw Error("--batches must be at least 1");
  if (options.split != "train" && options.split != "test") {
    throw Error("--split must be train or test, got '" + options.split + "'");
  }
  std::vector<double> rates;
  for (int workers : options.workers) {
    if (workers < 0) throw Error("--workers: a worker count must be 0 or more");
    std::vector<std::string> overrides = options.overrides;
    overrides.push_back(fmt::format("++data.{}.workers={}", options.split, workers));
    const ConfigNode root = load_run_config(options.config, overrides);
    const auto loader =
        make_loader(root.at("data"), options.split, uint64_t(root.get<int64_t>("seed", 1)), nullptr,
                    nullptr, root.has("model") ? soft_target_classes(root.at("model")) : 0);
    if (rates.empty()) {
      out << fmt::format("loader of data.{}: {}, batch {}, {} transform(s), {} batches timed\n",
                         options.split, loader->dataset().description(),
                         loader->options().batch_size, loader->options().transforms.size(),
                         options.batches);
      out << fmt::format("{:>8} {:>12} {:>12}\n", "workers", "images/s", "ms/batch");
    }
    loader->next();  // starts the workers and fills the prefetch queue
    int64_t images = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < options.batches; ++b) images += loader->next().data.dim(0);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(double(images) / seconds);
    out << fmt::format("{:>8} {:>12.0f} {:>12.3f}\n", workers, rates.back(),
                       1e3 * seconds / double(options.batches))
        << std::flush;
  }
  return rates;
}

}  // namespace crema
