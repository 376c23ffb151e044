// crema pack: an image folder or list file written as a packed dataset, a few large shard files
// and an index (data/packed_writer.h; read back with `source: {format: packed, root: OUT}`):
//
//   crema pack photos/train photos_packed/train                       # files kept as they are
//   crema pack photos/train OUT --max-side 512 --quality 90           # larger photos re-encoded
//   crema pack train.txt OUT --root /data/images --shard-size 1GiB    # a list file
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include "apps/data_commands.h"
#include "core/error.h"
#include "data/image_files.h"
#include "layers/conv_algorithms.h"

namespace crema {
namespace {

std::unique_ptr<data::ImageFileDataset> pack_source(const PackCommandOptions& options) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(options.source, error);
  if (std::filesystem::is_directory(status)) {
    if (!options.root.empty() || options.num_classes != 0) {
      throw Error("--root and --num-classes are for a list file; '" + options.source +
                  "' is an image folder");
    }
    return data::load_image_folder(options.source, 3, options.max_pixels);
  }
  if (std::filesystem::is_regular_file(status)) {
    return data::load_image_list(options.source, options.root, 3, options.num_classes,
                                 options.max_pixels);
  }
  throw Error("pack: SOURCE '" + options.source + "' is neither an image folder nor a list file (" +
              (std::filesystem::exists(status) ? "another kind of file" : "it does not exist") +
              ")");
}

}  // namespace

data::PackSummary pack_command(const PackCommandOptions& options, std::ostream& out) {
  if (options.out_dir.empty()) throw Error("pack needs an OUT folder");
  // The sizes `workspace_limit` takes: 256MB, 1GiB, or bytes.
  const std::optional<size_t> shard_bytes = parse_workspace_limit(options.shard_size);
  if (!shard_bytes || *shard_bytes == 0 || options.shard_size == "none") {
    throw Error("--shard-size '" + options.shard_size +
                "' is not a size; write bytes or e.g. 256MB, 1GiB");
  }
  if (options.num_classes < 0) throw Error("--num-classes must be positive");
  if (options.workers < 0) throw Error("--workers must be 0 (one per core) or more");
  if (options.max_pixels < 1) throw Error("--max-image-pixels must be positive");
  const std::unique_ptr<data::ImageFileDataset> source = pack_source(options);
  data::PackOptions pack;
  pack.shard_bytes = *shard_bytes;
  pack.max_side = options.max_side;
  pack.quality = options.quality;
  pack.skip_bad = options.skip_bad;
  pack.workers =
      options.workers > 0 ? options.workers : std::max(1, int(std::thread::hardware_concurrency()));
  pack.max_pixels = options.max_pixels;
  pack.root =
      std::filesystem::is_directory(options.source)
          ? options.source
          : (options.root.empty() ? std::filesystem::path(options.source).parent_path().string()
                                  : options.root);
  const data::PackSummary summary = data::write_packed(*source, options.out_dir, pack);
  out << fmt::format("packed {} images of {} into '{}': {} shard(s), {:.1f} MiB", summary.samples,
                     source->description(), options.out_dir, summary.shards,
                     double(summary.bytes) / double(1 << 20));
  if (summary.reencoded > 0) {
    out << fmt::format(", {} re-encoded at most {} px a side", summary.reencoded, options.max_side);
  }
  out << "\n";
  if (!summary.skipped.empty()) {
    out << fmt::format("skipped {} file(s) that do not decode (--skip-bad):\n",
                       summary.skipped.size());
    for (const std::string& line : summary.skipped) out << "  " << line << "\n";
  }
  return summary;
}

}  // namespace crema
