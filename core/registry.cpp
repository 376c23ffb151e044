#include "core/registry.h"

#include "core/error.h"

namespace crema {

void LayerRegistry::add(const std::string& type, Factory factory) {
  CREMA_CHECK(!has(type), "layer type '" + type + "' registered twice");
  factories_[type] = std::move(factory);
}

std::unique_ptr<Layer> LayerRegistry::create(const LayerSpec& spec) const {
  auto it = factories_.find(spec.type);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& type : types()) known += (known.empty() ? "" : ", ") + type;
    const std::string guess = closest_match(spec.type, types());
    std::string message = "layer '" + spec.name + "': unknown layer type '" + spec.type + "'";
    if (!guess.empty()) message += " (did you mean '" + guess + "'?)";
    message += "; known types: " + known;
    if (spec.node != nullptr) spec.node->at("type").fail(message);
    throw Error(message);
  }
  return it->second(spec);
}

std::vector<std::string> LayerRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& entry : factories_) out.push_back(entry.first);
  return out;
}

}  // namespace crema
