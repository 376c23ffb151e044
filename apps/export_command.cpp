// crema export-images: a dataset written out as an image folder (one subfolder per class), so the
// image-file path of the loader can be exercised, and compared, on real images:
//
//   crema export-images --images train-images-idx3-ubyte.gz --labels train-labels-idx1-ubyte.gz
//       --out fmnist_png/train                                  # all 60,000 as PNG
//   crema export-images ... --classes 5,7,9 --per-class 100     # the first 100 of each class
//   crema export-images configs/x.yaml --split test --out DIR --format jpg   # any data source
//
// Pixels are written as they come from the source, before any transform (0..255 for 8-bit
// sources), so a PNG export reads back bit for bit.
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>

#include <fmt/format.h>

#include "apps/data_commands.h"
#include "apps/session.h"
#include "apps/training/data_config.h"
#include "core/config.h"
#include "core/error.h"
#include "data/idx.h"
#include "data/image.h"

namespace crema {
namespace {

int digits(int64_t value) {
  return int(std::to_string(std::max<int64_t>(value, 0)).size());
}

std::shared_ptr<const data::Dataset> export_source(const ExportImagesOptions& options) {
  const bool from_idx = !options.images.empty() || !options.labels.empty();
  if (from_idx == !options.config.empty()) {
    throw Error(
        "export-images reads either a config (CONFIG [--split train|test]) or IDX files "
        "(--images FILE --labels FILE): give one of the two");
  }
  if (from_idx) {
    if (options.images.empty() || options.labels.empty()) {
      throw Error("export-images needs both --images and --labels for IDX files");
    }
    return data::load_idx_dataset(options.images, options.labels);
  }
  if (options.split != "train" && options.split != "test") {
    throw Error("--split must be train or test, got '" + options.split + "'");
  }
  const ConfigNode root = load_run_config(options.config, options.overrides);
  return make_dataset(root.at("data").at(options.split).at("source"));
}

// The folder of each class (see data_commands.h for the rule).
std::vector<std::string> class_folders(const data::Dataset& dataset,
                                       const std::vector<std::string>& given) {
  const int64_t classes = dataset.num_classes();
  if (!given.empty() && int64_t(given.size()) != classes) {
    throw Error(fmt::format("--class-names gives {} names for the {} classes of {}", given.size(),
                            classes, dataset.description()));
  }
  const std::vector<std::string> own = dataset.class_names();
  std::vector<std::string> folders;
  for (int64_t c = 0; c < classes; ++c) {
    if (given.empty() && int64_t(own.size()) == classes) {
      folders.push_back(own[size_t(c)]);
    } else {
      std::string folder = fmt::format("{:0{}}", c, digits(classes - 1));
      if (!given.empty()) folder += "_" + given[size_t(c)];
      folders.push_back(folder);
    }
  }
  return folders;
}

}  // namespace

int64_t export_images_command(const ExportImagesOptions& options, std::ostream& out) {
  if (options.out_dir.empty()) throw Error("export-images needs --out DIR");
  if (options.per_class < 0) throw Error("--per-class must be 0 (all) or more");
  if (options.quality < 1 || options.quality > 100) throw Error("--quality must lie in 1..100");
  const data::ImageFormat format = data::parse_image_format(options.format);
  const std::shared_ptr<const data::Dataset> dataset = export_source(options);
  const int64_t classes = dataset->num_classes();
  const std::vector<std::string> folders = class_folders(*dataset, options.class_names);

  std::vector<bool> wanted(size_t(classes), options.classes.empty());
  for (int64_t c : options.classes) {
    if (c < 0 || c >= classes) {
      throw Error(fmt::format("--classes: {} is not a class of {} (labels 0..{})", c,
                              dataset->description(), classes - 1));
    }
    wanted[size_t(c)] = true;
  }
  for (int64_t c = 0; c < classes; ++c) {
    if (!wanted[size_t(c)]) continue;
    std::filesystem::create_directories(std::filesystem::path(options.out_dir) /
                                        folders[size_t(c)]);
  }
  std::ofstream list;
  if (!options.list_file.empty()) {
    list.open(options.list_file);
    if (!list) throw Error("cannot create the list file '" + options.list_file + "'");
  }

  const int name_width = std::max(5, digits(dataset->size() - 1));
  std::vector<int64_t> written(size_t(classes), 0);
  int64_t total = 0;
  data::Image image;
  for (int64_t i = 0; i < dataset->size(); ++i) {
    const int64_t label = dataset->label(i);
    if (!wanted[size_t(label)]) continue;
    if (options.per_class > 0 && written[size_t(label)] >= options.per_class) continue;
    dataset->read_sample(i, image);
    const std::string relative = fmt::format("{}/{:0{}}{}", folders[size_t(label)], i, name_width,
                                             data::image_extension(format));
    data::write_image_file(options.out_dir + "/" + relative, image, format, options.quality);
    if (list.is_open()) list << relative << " " << label << "\n";
    ++written[size_t(label)];
    ++total;
  }
  if (list.is_open() && !list.flush()) {
    throw Error("cannot write the list file '" + options.list_file + "'");
  }
  std::string counts;
  for (int64_t c = 0; c < classes; ++c) {
    if (!wanted[size_t(c)]) continue;
    counts +=
        fmt::format("{}{}: {}", counts.empty() ? "" : ", ", folders[size_t(c)], written[size_t(c)]);
  }
  out << fmt::format("exported {} images of {} to {} ({})\n", total, dataset->description(),
                     options.out_dir, counts);
  return total;
}

}  // namespace crema
