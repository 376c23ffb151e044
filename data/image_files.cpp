#include "data/image_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "core/error.h"

namespace fs = std::filesystem;

namespace crema::data {
namespace {

constexpr int kShapeProbes = 16;

bool is_image_file(const fs::path& path) {
  static const std::set<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga",
                                                   ".psd", ".hdr", ".pic",  ".ppm", ".pgm", ".pnm"};
  std::string extension = path.extension().string();
  for (char& ch : extension) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return extensions.count(extension) > 0;
}

bool is_hidden(const fs::path& path) {
  return path.filename().string().rfind('.', 0) == 0;
}

// The image files under `dir` at any depth, sorted by path; hidden entries are skipped.
// `others` counts the files skipped for their extension.
std::vector<std::string> image_files_under(const fs::path& dir, int64_t& others) {
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink), end;
  for (; it != end; ++it) {
    if (is_hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    if (is_image_file(it->path())) {
      files.push_back(it->path().string());
    } else {
      ++others;
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

ImageFileDataset::ImageFileDataset(std::string name, std::vector<ImageFile> files,
                                   std::vector<std::string> class_names, int64_t num_classes,
                                   int channels, int64_t max_pixels)
    : name_(std::move(name)),
      files_(std::move(files)),
      class_names_(std::move(class_names)),
      num_classes_(num_classes),
      channels_(channels),
      max_pixels_(max_pixels) {
  if (files_.empty()) throw Error(name_ + ": no image files");
  if (channels_ != 1 && channels_ != 3) {
    throw Error(name_ + ": channels is " + std::to_string(channels_) +
                "; images are read as 1 (grayscale) or 3 (RGB) channels");
  }
  std::string first_error;
  for (int64_t i = 0; i < std::min<int64_t>(size(), kShapeProbes); ++i) {
    try {
      sample_shape_ = image_file_shape(files_[size_t(i)].path, channels_, max_pixels_);
      return;
    } catch (const Error& e) {
      if (first_error.empty()) first_error = sample_name(i) + ": " + e.what();
    }
  }
  throw Error(name_ + ": cannot take the image size from its first files; " + first_error);
}

const ImageFile& ImageFileDataset::file(int64_t index) const {
  CREMA_CHECK(index >= 0 && index < size(), name_ + ": sample index " + std::to_string(index) +
                                                " outside [0, " + std::to_string(size()) + ")");
  return files_[size_t(index)];
}

void ImageFileDataset::read_sample(int64_t index, Image& out) const {
  read_sample_reduced(index, out, {});
}

void ImageFileDataset::read_sample_reduced(int64_t index, Image& out,
                                           const DecodePlanner& plan) const {
  const ImageFile& f = file(index);
  DecodeOptions options;
  options.max_pixels = max_pixels_;
  options.plan = plan;
  if (f.origin.empty()) {
    read_image_file(f.path, channels_, out, options);
    return;
  }
  try {
    read_image_file(f.path, channels_, out, options);
  } catch (const Error& e) {
    throw Error(f.origin + ": " + e.what());
  }
}

bool ImageFileDataset::read_encoded(int64_t index, EncodedSample& out) const {
  const ImageFile& f = file(index);
  out.channels = channels_;
  out.max_pixels = max_pixels_;
  out.name = f.origin.empty() ? f.path : f.origin + ": " + f.path;
  try {
    out.bytes = read_image_bytes(f.path);
  } catch (const Error& e) {
    if (f.origin.empty()) throw;
    throw Error(f.origin + ": " + e.what());
  }
  return true;
}

int64_t ImageFileDataset::label(int64_t index) const {
  return file(index).label;
}

std::string ImageFileDataset::sample_name(int64_t index) const {
  const ImageFile& f = file(index);
  return f.origin.empty() ? "'" + f.path + "'" : f.origin + " '" + f.path + "'";
}

std::string ImageFileDataset::description() const {
  return name_ + " (" + std::to_string(size()) + " images, " + std::to_string(num_classes_) +
         " classes, the first " + shape_str(sample_shape_) + ")";
}

std::unique_ptr<ImageFileDataset> load_image_folder(const std::string& root, int channels,
                                                    int64_t max_pixels) {
  const std::string what = "image folder '" + root + "'";
  std::error_code error;
  if (!fs::exists(root, error)) throw Error(what + " does not exist");
  if (!fs::is_directory(root, error)) throw Error(what + " is not a folder");
  std::vector<std::string> class_names;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (entry.is_directory() && !is_hidden(entry.path())) {
      class_names.push_back(entry.path().filename().string());
    }
  }
  if (class_names.empty()) {
    throw Error(what +
                " has no class subfolders; expected one folder per class holding its "
                "images, e.g. " +
                root + "/cat/001.jpg");
  }
  std::sort(class_names.begin(), class_names.end());
  std::vector<ImageFile> files;
  for (size_t c = 0; c < class_names.size(); ++c) {
    const fs::path dir = fs::path(root) / class_names[c];
    int64_t others = 0;
    const std::vector<std::string> paths = image_files_under(dir, others);
    if (paths.empty()) {
      throw Error(what + ": the class folder '" + dir.string() + "' holds no image file (.png, " +
                  ".jpg, .bmp, ...)" +
                  (others > 0 ? ", only " + std::to_string(others) + " other file(s)" : "") +
                  "; add images or remove the folder");
    }
    for (const std::string& path : paths) files.push_back({path, int32_t(c), ""});
  }
  const int64_t num_classes = int64_t(class_names.size());
  return std::make_unique<ImageFileDataset>(what, std::move(files), std::move(class_names),
                                            num_classes, channels, max_pixels);
}

std::unique_ptr<ImageFileDataset> load_image_list(const std::string& list_path,
                                                  const std::string& root, int channels,
                                                  int64_t num_classes, int64_t max_pixels) {
  std::ifstream in(list_path);
  if (!in) throw Error("cannot open the image list '" + list_path + "'");
  const fs::path base = root.empty() ? fs::path(list_path).parent_path() : fs::path(root);
  std::vector<ImageFile> files;
  int32_t max_label = -1;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    const std::string where = list_path + ":" + std::to_string(number);
    const size_t blank = text.find_last_of(" \t");
    if (blank == std::string::npos) {
      throw Error(where + ": expected '<path> <label>', got '" + text + "' (no label)");
    }
    const std::string path = trim(text.substr(0, blank));
    const std::string label_text = text.substr(blank + 1);
    size_t used = 0;
    long long label = -1;
    try {
      label = std::stoll(label_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != label_text.size() || label < 0 || label > INT32_MAX) {
      throw Error(where + ": the label '" + label_text +
                  "' is not a class number (a whole number from 0)");
    }
    if (num_classes > 0 && label >= num_classes) {
      throw Error(where + ": the label " + label_text + " is outside the " +
                  std::to_string(num_classes) + " classes (num_classes)");
    }
    const fs::path file = fs::path(path).is_absolute() ? fs::path(path) : base / path;
    files.push_back({file.string(), int32_t(label), where});
    max_label = std::max(max_label, int32_t(label));
  }
  if (in.bad()) throw Error("cannot read the image list '" + list_path + "'");
  if (files.empty()) throw Error("the image list '" + list_path + "' names no image");
  const int64_t classes = num_classes > 0 ? num_classes : int64_t(max_label) + 1;
  return std::make_unique<ImageFileDataset>("image list '" + list_path + "'", std::move(files),
                                            std::vector<std::string>{}, classes, channels,
                                            max_pixels);
}

}  // namespace crema::data
