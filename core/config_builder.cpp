// Building and editing ConfigNode trees (see core/config_builder.h).
#include "core/config_builder.h"

#include <algorithm>

#include "core/error.h"

namespace crema {

ConfigNode ConfigBuilder::make(ConfigNode::Kind kind, Location location) {
  ConfigNode node;
  node.kind_ = kind;
  node.location_ = std::move(location);
  return node;
}

void ConfigBuilder::append(ConfigNode& sequence, ConfigNode element) {
  CREMA_CHECK(sequence.is_sequence(), "append to a node that is not a sequence");
  sequence.sequence_.push_back(std::move(element));
}

void ConfigBuilder::add(ConfigNode& map, std::string key, Location key_location, ConfigNode value) {
  CREMA_CHECK(map.is_map(), "add a key to a node that is not a map");
  map.map_.push_back({std::move(key), std::move(key_location), std::move(value)});
}

const std::vector<ConfigNode::MapEntry>& ConfigBuilder::entries(const ConfigNode& map) {
  return map.map_;
}

ConfigNode* ConfigBuilder::find(ConfigNode& map, const std::string& key) {
  CREMA_CHECK(map.is_map(), "find a key in a node that is not a map");
  for (ConfigNode::MapEntry& entry : map.map_) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

void ConfigBuilder::erase(ConfigNode& map, const std::string& key) {
  auto& entries = map.map_;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const ConfigNode::MapEntry& e) { return e.key == key; }),
                entries.end());
}

ConfigNode& ConfigBuilder::element(ConfigNode& sequence, size_t index) {
  CREMA_CHECK(sequence.is_sequence() && index < sequence.sequence_.size(),
              "element index out of range");
  return sequence.sequence_[index];
}

void ConfigBuilder::merge(ConfigNode& base, ConfigNode over) {
  const ConfigNode* replace = over.is_map() ? find(over, "_replace_") : nullptr;
  if (!base.is_map() || !over.is_map() || (replace && replace->as<bool>())) {
    base = std::move(over);
    return;
  }
  base.location_ = std::move(over.location_);
  for (ConfigNode::MapEntry& entry : over.map_) {
    auto same_key = [&](const ConfigNode::MapEntry& e) { return e.key == entry.key; };
    const auto existing = std::find_if(base.map_.begin(), base.map_.end(), same_key);
    if (existing == base.map_.end()) {
      base.map_.push_back(std::move(entry));
    } else {
      existing->key_location = std::move(entry.key_location);
      merge(existing->value, std::move(entry.value));
    }
  }
}

void ConfigBuilder::assign_paths(ConfigNode& node, const std::string& path) {
  node.path_ = path;
  for (ConfigNode::MapEntry& entry : node.map_) {
    assign_paths(entry.value, path.empty() ? entry.key : path + "." + entry.key);
  }
  for (size_t i = 0; i < node.sequence_.size(); ++i) {
    assign_paths(node.sequence_[i], path + "[" + std::to_string(i) + "]");
  }
}

}  // namespace crema
