#include "apps/training/data_config.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "data/cifar.h"
#include "data/gpu_decode.h"
#include "data/idx.h"
#include "data/image_files.h"
#include "data/packed.h"

namespace crema {
namespace {

const char* const kFormats = "idx, image_folder, image_list, packed, cifar10, cifar100";

using DatasetPtr = std::shared_ptr<const data::Dataset>;

int read_channels(const ConfigNode& source) {
  const int channels = source.get<int>("channels", 3);
  if (channels != 1 && channels != 3) {
    source.at("channels")
        .fail("channels must be 1 (grayscale) or 3 (RGB), got " + std::to_string(channels));
  }
  return channels;
}

// Images with more pixels are refused as decompression bombs (data/image.h).
int64_t read_max_image_pixels(const ConfigNode& source) {
  const int64_t max_pixels = source.get<int64_t>("max_image_pixels", data::kDefaultMaxImagePixels);
  if (max_pixels < 1) source.at("max_image_pixels").fail("max_image_pixels must be positive");
  return max_pixels;
}

// Reads the keys of a `format` source and returns what loads it, so that a misspelt key is
// reported before any file is read.
std::function<DatasetPtr()> source_reader(const ConfigNode& source, const std::string& format) {
  if (format == "idx") {
    const std::string images = source.get<std::string>("images");
    const std::string labels = source.get<std::string>("labels");
    return [=] { return DatasetPtr(data::load_idx_dataset(images, labels)); };
  }
  if (format == "image_folder") {
    const std::string root = source.get<std::string>("root");
    const int channels = read_channels(source);
    const int64_t max_pixels = read_max_image_pixels(source);
    return [=] { return DatasetPtr(data::load_image_folder(root, channels, max_pixels)); };
  }
  if (format == "image_list") {
    const std::string list = source.get<std::string>("list");
    const std::string root = source.get<std::string>("root", std::string());
    const int64_t num_classes = source.get<int64_t>("num_classes", 0);
    if (num_classes < 0) source.at("num_classes").fail("num_classes must be positive");
    const int channels = read_channels(source);
    const int64_t max_pixels = read_max_image_pixels(source);
    return [=] {
      return DatasetPtr(data::load_image_list(list, root, channels, num_classes, max_pixels));
    };
  }
  if (format == "packed") {
    const std::string root = source.get<std::string>("root");
    const int channels = read_channels(source);
    const int64_t max_pixels = read_max_image_pixels(source);
    return [=] { return DatasetPtr(data::load_packed(root, channels, max_pixels)); };
  }
  if (format == "cifar10" || format == "cifar100") {
    const std::vector<std::string> files = source.get_list<std::string>("files");
    data::CifarVariant variant = data::CifarVariant::cifar10;
    if (format == "cifar100") {
      const std::string label = source.get<std::string>("label", "fine");
      if (label != "fine" && label != "coarse") {
        source.at("label").fail("label must be fine (100 classes) or coarse (20), got '" + label +
                                "'");
      }
      variant =
          label == "fine" ? data::CifarVariant::cifar100_fine : data::CifarVariant::cifar100_coarse;
    }
    return [=] { return DatasetPtr(data::load_cifar(files, variant)); };
  }
  source.at("format").fail("unknown data format '" + format + "' (known: " + kFormats + ")");
}

// `classes:` entries are labels, or class names for a source that names its classes.
std::vector<int64_t> read_classes(const ConfigNode& list, const data::Dataset& dataset) {
  if (!list.is_sequence()) list.fail("classes: expected a list such as [5, 7, 9]");
  const std::vector<std::string> names = dataset.class_names();
  std::vector<int64_t> classes;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string& text = list[i].scalar();
    size_t used = 0;
    int64_t label = -1;
    try {
      label = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size()) {
      const auto found = std::find(names.begin(), names.end(), text);
      if (found == names.end()) {
        list[i].fail("classes: '" + text + "' is neither a label nor a class name of " +
                     dataset.description());
      }
      label = int64_t(found - names.begin());
    }
    classes.push_back(label);
  }
  return classes;
}

bool is_number(const std::string& text) {
  size_t used = 0;
  try {
    std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size();
}

// A YAML double-quoted string holding `text`.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// `node`'s path as the rule above reads it, and whether that differs from what is written.
std::string resolved_path(const ConfigNode& node, bool& changed) {
  const std::string& written = node.scalar();
  const std::string& file = node.location().file;
  changed = !written.empty() && !std::filesystem::path(written).is_absolute() && file != "--set" &&
            !file.empty();
  if (!changed) return written;
  return std::filesystem::absolute(std::filesystem::path(file).parent_path() / written)
      .lexically_normal()
      .string();
}

}  // namespace

std::vector<std::string> data_path_overrides(const ConfigNode& root) {
  std::vector<std::string> overrides;
  if (!root.has("data") || !root.at("data").is_map()) return overrides;
  const ConfigNode& data = root.at("data");
  for (const std::string split : {"train", "test"}) {
    if (!data.has(split) || !data.at(split).is_map() || !data.at(split).has("source")) continue;
    const ConfigNode& source = data.at(split).at("source");
    if (!source.is_map()) continue;
    const std::string prefix = "data." + split + ".source.";
    for (const std::string key : {"images", "labels", "root", "list"}) {
      if (!source.has(key) || !source.at(key).is_scalar()) continue;
      bool changed = false;
      const std::string path = resolved_path(source.at(key), changed);
      if (changed) overrides.push_back(prefix + key + "=" + quoted(path));
    }
    if (source.has("files") && source.at("files").is_sequence()) {
      const ConfigNode& files = source.at("files");
      bool any = false;
      std::string list;
      for (size_t i = 0; i < files.size(); ++i) {
        bool changed = false;
        list += (i ? ", " : "") + quoted(resolved_path(files[i], changed));
        any = any || changed;
      }
      if (any) overrides.push_back(prefix + "files=[" + list + "]");
    }
  }
  return overrides;
}

std::shared_ptr<const data::Dataset> make_dataset(const ConfigNode& source) {
  const std::string format = source.get<std::string>("format");
  const std::function<DatasetPtr()> read = source_reader(source, format);
  const ConfigNode* classes = source.has("classes") ? &source.at("classes") : nullptr;
  source.check_no_unknown_keys("data source (" + format + ")");
  DatasetPtr dataset;
  try {
    dataset = read();
  } catch (const Error& e) {
    source.fail(e.what());
  }
  if (classes != nullptr) {
    const std::vector<int64_t> labels = read_classes(*classes, *dataset);
    try {
      dataset = data::select_classes(dataset, labels);
    } catch (const Error& e) {
      classes->fail(e.what());
    }
  }
  return dataset;
}

// Each list entry is a one-key map {kind: value, [values] or {option: value, ...}}, or a bare
// kind that takes its defaults (horizontal_flip).
std::vector<std::shared_ptr<const data::Transform>> read_transforms(const ConfigNode& list) {
  std::vector<std::shared_ptr<const data::Transform>> out;
  if (!list.is_sequence()) list.fail("transform: expected a list such as [{scale: 0.00390625}]");
  for (size_t i = 0; i < list.size(); ++i) {
    const ConfigNode& item = list[i];
    data::TransformSpec spec;
    if (item.is_scalar()) {
      spec.kind = item.scalar();
    } else if (item.is_map() && item.keys().size() == 1) {
      spec.kind = item.keys()[0];
      const ConfigNode& value = item.at(spec.kind);
      if (value.is_map()) {
        for (const std::string& option : value.keys()) {
          const ConfigNode& values = value.at(option);
          if (values.is_scalar() && !is_number(values.scalar())) {
            spec.words[option] = values.scalar();  // {interpolation: bilinear}
          } else {
            spec.options[option] = value.get_list<float>(option);
          }
        }
      } else if (value.is_scalar() && !is_number(value.scalar())) {
        spec.preset = value.scalar();  // {normalize: imagenet}
      } else if (!value.is_null()) {
        spec.values = item.get_list<float>(spec.kind);
      }
    } else {
      item.fail(
          "transform: each entry is one {kind: value} pair, e.g. {scale: 0.00390625} or "
          "{random_crop: {size: 28, padding: 4}}");
    }
    try {
      out.push_back(data::make_transform(spec));
    } catch (const Error& e) {
      item.fail(e.what());
    }
  }
  return out;
}

int64_t soft_target_classes(const ConfigNode& model) {
  if (!model.is_map() || !model.has("inputs") || !model.at("inputs").is_map() ||
      !model.at("inputs").has("label")) {
    return 0;  // the net's own checks name what is missing
  }
  const std::vector<int64_t> dims = model.at("inputs").get_list<int64_t>("label");
  return dims.size() == 1 && dims[0] > 1 ? dims[0] : 0;
}

namespace {

// data.<split>.batch_mix; errors at the key they concern.
data::BatchMixOptions read_batch_mix(const ConfigNode& node, int64_t target_classes) {
  data::BatchMixOptions mix;
  mix.mixup_alpha = node.get<double>("mixup_alpha", mix.mixup_alpha);
  mix.cutmix_alpha = node.get<double>("cutmix_alpha", mix.cutmix_alpha);
  mix.switch_prob = node.get<double>("switch_prob", mix.switch_prob);
  mix.prob = node.get<double>("prob", mix.prob);
  mix.label_smoothing = node.get<double>("label_smoothing", mix.label_smoothing);
  node.check_no_unknown_keys("batch_mix");
  try {
    data::check_batch_mix(mix);
  } catch (const Error& e) {
    for (const std::string key :
         {"mixup_alpha", "cutmix_alpha", "switch_prob", "prob", "label_smoothing"}) {
      if (std::string(e.what()).find("batch_mix." + key + " ") != std::string::npos) {
        node.fail_at_key(key, e.what());
      }
    }
    node.fail(e.what());
  }
  if (target_classes == 0) {
    node.fail(
        "batch_mix mixes the labels into soft targets, so the net's label input must be a row of "
        "class weights: set model.inputs.label to [K] for K classes (e.g. label: [10]) and feed "
        "it to SoftmaxWithLoss");
  }
  return mix;
}

}  // namespace

std::unique_ptr<data::DataLoader> make_loader(const ConfigNode& data, const std::string& split,
                                              uint64_t seed, Allocator* batch_allocator,
                                              const ClassList* classes, int64_t target_classes,
                                              std::pair<int, int> shard) {
  const ConfigNode& node = data.at(split);
  const bool training = split == "train";
  std::shared_ptr<const data::Dataset> dataset = make_dataset(node.at("source"));
  if (classes != nullptr) {
    try {
      dataset = align_classes(std::move(dataset), *classes);
    } catch (const Error& e) {
      node.at("source").fail(e.what());
    }
  }
  data::DataLoaderOptions options;
  options.batch_size = node.get<int64_t>("batch_size");
  if (options.batch_size <= 0) node.at("batch_size").fail("batch_size must be positive");
  options.shuffle = node.get<bool>("shuffle", training);
  options.drop_last = node.get<bool>("drop_last", training);
  options.num_workers = node.get<int>("workers", 1);
  options.prefetch = node.get<int>("prefetch", 4);
  options.skip_bad = node.get<bool>("skip_bad", false);
  options.reduced_decoding = node.get<bool>("reduced_decoding", true);
  const std::string decode = node.get<std::string>("decode", "cpu");
  if (node.has("gpu_backend")) {
    const std::string backend = node.get<std::string>("gpu_backend");
    if (decode != "gpu") node.at("gpu_backend").fail("gpu_backend applies to decode: gpu only");
    if (backend == "hybrid") {
      options.gpu_backend = data::GpuJpegBackend::hybrid;
    } else if (backend == "mixed") {
      options.gpu_backend = data::GpuJpegBackend::mixed;
    } else if (backend != "auto") {
      node.at("gpu_backend")
          .fail("gpu_backend is auto (nvJPEG's hardware engines where the GPU has them), hybrid "
                "(decoding on the SMs) or mixed (every other worker hybrid), got '" +
                backend + "'");
    }
  }
  if (decode == "gpu") {
    if (!data::gpu_decoding_built()) {
      try {
        data::make_gpu_batch_decoder(0, 3);  // throws, saying how to get nvJPEG
      } catch (const Error& e) {
        node.at("decode").fail(e.what());
      }
    }
    if (gpu::device_count() == 0)
      node.at("decode").fail("decode: gpu needs a CUDA GPU; none is visible");
    options.gpu_decode = gpu::current_device();  // the run's (its Context made it current)
  } else if (decode != "cpu") {
    node.at("decode").fail(
        "decode is cpu (the loader's workers) or gpu (nvJPEG and CUDA "
        "kernels on the run's GPU), got '" +
        decode + "'");
  }
  options.report = [](const std::string& line) { std::cerr << "crema: warning: " << line << "\n"; };
  options.seed = seed;
  options.shard_rank = shard.first;
  options.shard_count = shard.second;
  options.allocator = batch_allocator;
  if (node.has("transform")) options.transforms = read_transforms(node.at("transform"));
  options.target_classes = target_classes;
  if (node.has("batch_mix")) {
    if (!training) {  // mixed test batches would score blends of images, not the test set
      node.fail_at_key("batch_mix", "batch_mix mixes training batches only; data." + split +
                                        " is evaluated on its images and labels as they are");
    }
    options.batch_mix = read_batch_mix(node.at("batch_mix"), target_classes);
  }
  node.check_no_unknown_keys("data." + split);
  try {
    return std::make_unique<data::DataLoader>(dataset, options);
  } catch (const Error& e) {
    node.fail(e.what());
  }
}

}  // namespace crema
