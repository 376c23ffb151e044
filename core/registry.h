// LayerRegistry: layer type name -> factory. Filled explicitly by layers/register_layers.cpp
// (no static-initializer magic, which silently vanishes in static links).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/layer.h"

namespace crema {

class LayerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Layer>(const LayerSpec&)>;

  void add(const std::string& type, Factory factory);
  bool has(const std::string& type) const { return factories_.count(type) != 0; }
  // Throws crema::Error for an unknown type, with a did-you-mean and the list of known types.
  std::unique_ptr<Layer> create(const LayerSpec& spec) const;
  std::vector<std::string> types() const;

  template <class L>
  void add(const std::string& type) {
    add(type, [](const LayerSpec& spec) { return std::make_unique<L>(spec); });
  }

 private:
  std::map<std::string, Factory> factories_;
};

}  // namespace crema
