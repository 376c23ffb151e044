#include "apps/data_config.h"

#include "core/error.h"
#include "data/idx.h"

namespace crema {
namespace {

std::shared_ptr<const data::Dataset> read_source(const ConfigNode& source) {
  const std::string format = source.get<std::string>("format");
  if (format != "idx") source.at("format").fail("unknown data format '" + format + "' (known: idx)");
  const std::string images = source.get<std::string>("images");
  const std::string labels = source.get<std::string>("labels");
  source.check_no_unknown_keys("data source (" + format + ")");
  try {
    return data::load_idx_dataset(images, labels);
  } catch (const Error& e) {
    source.fail(e.what());
  }
}

// Each list entry is a one-key map {kind: value or [values]}.
std::vector<std::shared_ptr<const data::Transform>> read_transforms(const ConfigNode& list) {
  std::vector<std::shared_ptr<const data::Transform>> out;
  if (!list.is_sequence()) list.fail("transform: expected a list such as [{scale: 0.00390625}]");
  for (size_t i = 0; i < list.size(); ++i) {
    const ConfigNode& item = list[i];
    if (!item.is_map() || item.keys().size() != 1) {
      item.fail("transform: each entry is one {kind: value} pair, e.g. {scale: 0.00390625}");
    }
    data::TransformSpec spec;
    spec.kind = item.keys()[0];
    spec.values = item.get_list<float>(spec.kind);
    try {
      out.push_back(data::make_transform(spec));
    } catch (const Error& e) {
      item.fail(e.what());
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<data::DataLoader> make_loader(const ConfigNode& data, const std::string& split,
                                              uint64_t seed) {
  const ConfigNode& node = data.at(split);
  const bool training = split == "train";
  std::shared_ptr<const data::Dataset> dataset = read_source(node.at("source"));
  data::DataLoaderOptions options;
  options.batch_size = node.get<int64_t>("batch_size");
  if (options.batch_size <= 0) node.at("batch_size").fail("batch_size must be positive");
  options.shuffle = node.get<bool>("shuffle", training);
  options.drop_last = node.get<bool>("drop_last", training);
  options.num_workers = node.get<int>("workers", 1);
  options.prefetch = node.get<int>("prefetch", 4);
  options.seed = seed;
  if (node.has("transform")) options.transforms = read_transforms(node.at("transform"));
  node.check_no_unknown_keys("data." + split);
  try {
    return std::make_unique<data::DataLoader>(dataset, options);
  } catch (const Error& e) {
    node.fail(e.what());
  }
}

}  // namespace crema
