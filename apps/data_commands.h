// The data subcommands of `crema`: exporting a dataset as image files, packing an image folder
// into shard files, and timing the loader.
// Callable from main.cpp and from tests; they throw crema::Error for anything the user should fix.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/packed_writer.h"

namespace crema {

// crema export-images: writes a dataset as an image folder, root/<class>/<index>.png, readable
// back by the image_folder source (the same pixels, for PNG).
struct ExportImagesOptions {
  std::string config;                  // a config whose data.<split>.source is exported ...
  std::vector<std::string> overrides;  // ... with these --set overrides
  std::string split = "train";
  std::string images, labels;            // ... or IDX files directly
  std::string out_dir;                   // the folder written (created)
  std::vector<int64_t> classes;          // labels to export; empty: all
  int64_t per_class = 0;                 // at most this many per class, the first ones; 0: all
  std::vector<std::string> class_names;  // names by label, for the folder names
  std::string format = "png";            // png or jpg
  int quality = 95;                      // JPEG quality, 1..100
  std::string list_file;                 // also write "<path relative to out_dir> <label>" lines
};

// Class folders are named after the source's own class names when it has them (an image
// folder), otherwise by the label zero-padded to one width (so that sorted order is label
// order), followed by "_<name>" when class_names gives one: 5_sandal, 7_sneaker, 9_ankle_boot.
// A file is named by its sample index in the source. Returns the number of images written.
int64_t export_images_command(const ExportImagesOptions& options, std::ostream& out);

// crema pack: an image folder or list file written as a packed dataset (data/packed_writer.h).
struct PackCommandOptions {
  std::string source;                // an image folder, or a list file of "<path> <label>" lines
  std::string out_dir;               // the folder written (replaced if it holds an earlier pack)
  std::string shard_size = "256MB";  // bytes, or with a unit: 256MB, 1GiB
  int64_t max_side = 0;     // re-encode images with a longer side as JPEG; 0: keep every file
  int quality = 90;         // JPEG quality of re-encoded images
  bool skip_bad = false;    // leave out files that do not decode, listing them
  int workers = 0;          // threads decoding and re-encoding files; 0: one per core
  std::string root;         // list file: where its paths start (default: the list's folder)
  int64_t num_classes = 0;  // list file: the number of classes (default: largest label + 1)
  int64_t max_pixels = data::kDefaultMaxImagePixels;
};

// Prints what was packed (and each file skipped); returns the summary.
data::PackSummary pack_command(const PackCommandOptions& options, std::ostream& out);

// crema bench-loader: how many decoded and transformed images per second the loader of
// data.<split> delivers, for each worker count, the consumer doing nothing else.
struct BenchLoaderOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string split = "train";
  std::vector<int> workers = {1, 2};
  int64_t batches = 100;  // timed batches per worker count, after one untimed
  std::string decode;     // "cpu" or "gpu": sets data.<split>.decode; empty: the config's
};

// Returns images/s for each entry of options.workers.
std::vector<double> bench_loader_command(const BenchLoaderOptions& options, std::ostream& out);

}  // namespace crema
