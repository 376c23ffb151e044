#include "layers/layer_keys.h"

namespace crema {

std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key,
                                    std::pair<int64_t, int64_t> fallback) {
  return node.has(key) ? read_hw(node, key) : fallback;
}

std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key) {
  const ConfigNode& value = node.at(key);
  if (value.is_scalar()) {
    const int64_t v = value.as<int64_t>();
    return {v, v};
  }
  if (!value.is_sequence() || value.size() != 2) {
    value.fail(key + ": expected one integer or [height, width]");
  }
  return {value[0].as<int64_t>(), value[1].as<int64_t>()};
}

}  // namespace crema
