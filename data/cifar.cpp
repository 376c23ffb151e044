#include "data/cifar.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"

namespace crema::data {
namespace {

constexpr int64_t kPixels = 3 * 32 * 32;

struct Layout {
  int64_t label_bytes;  // bytes before the pixels
  int64_t label_at;     // which of them is the label used
  int64_t classes;
  const char* names_file;
  const char* what;
};

Layout layout_of(CifarVariant variant) {
  switch (variant) {
    case CifarVariant::cifar10:
      return {1, 0, 10, "batches.meta.txt", "CIFAR-10"};
    case CifarVariant::cifar100_fine:
      return {2, 1, 100, "fine_label_names.txt", "CIFAR-100 (fine labels)"};
    case CifarVariant::cifar100_coarse:
      return {2, 0, 20, "coarse_label_names.txt", "CIFAR-100 (coarse labels)"};
  }
  CREMA_CHECK(false, "unknown CIFAR variant");
}

// The names in `path`, one per line, blank lines dropped; empty when the file is absent or
// does not hold exactly `classes` names.
std::vector<std::string> read_names(const std::filesystem::path& path, int64_t classes) {
  std::ifstream in(path);
  std::vector<std::string> names;
  std::string line;
  while (in && std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  if (int64_t(names.size()) != classes) names.clear();
  return names;
}

}  // namespace

std::unique_ptr<Dataset> load_cifar(const std::vector<std::string>& files, CifarVariant variant) {
  const Layout layout = layout_of(variant);
  const int64_t record = layout.label_bytes + kPixels;
  if (files.empty()) throw Error(std::string(layout.what) + ": no files given");
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open the " + std::string(layout.what) + " file '" + path + "'");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    if (in.bad())
      throw Error("cannot read the " + std::string(layout.what) + " file '" + path + "'");
    const int64_t size = int64_t(bytes.size());
    if (size == 0 || size % record != 0) {
      throw Error(std::string(layout.what) + " file '" + path + "' has " + std::to_string(size) +
                  " bytes, not a whole number of " + std::to_string(record) + "-byte records (" +
                  std::to_string(size / record) + " records and " + std::to_string(size % record) +
                  " bytes left over); is it a " + layout.what + " binary file, and complete?");
    }
    const int64_t count = size / record;
    for (int64_t r = 0; r < count; ++r) {
      const uint8_t* rec = bytes.data() + r * record;
      const int32_t label = rec[layout.label_at];
      if (label >= layout.classes) {
        throw Error(std::string(layout.what) + " file '" + path + "': record " + std::to_string(r) +
                    " has the label " + std::to_string(label) + ", outside the " +
                    std::to_string(layout.classes) + " classes; is it the right variant " +
                    "(cifar10: 3073-byte records, cifar100: 3074)?");
      }
      labels.push_back(label);
      pixels.insert(pixels.end(), rec + layout.label_bytes, rec + record);
    }
  }
  std::vector<std::string> names =
      read_names(std::filesystem::path(files[0]).parent_path() / layout.names_file, layout.classes);
  if (names.empty()) {
    for (int64_t c = 0; c < layout.classes; ++c) names.push_back(std::to_string(c));
  }
  std::string name = std::filesystem::path(files[0]).filename().string();
  if (files.size() > 1) name += " + " + std::to_string(files.size() - 1) + " more";
  return std::make_unique<InMemoryDataset>(name, Shape{3, 32, 32}, std::move(pixels),
                                           std::move(labels), std::move(names));
}

}  // namespace crema::data
