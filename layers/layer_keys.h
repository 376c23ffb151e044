// Small readers for keys that several layers share.
#pragma once

#include <string>
#include <utility>

#include "core/config.h"

namespace crema {

// A size given once for both spatial axes or as [height, width]: `kernel_size: 5`,
// `kernel_size: [3, 5]`. Returns {h, w}; `fallback` when the key is absent.
std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key,
                                    std::pair<int64_t, int64_t> fallback);
// The same for a required key: its absence is an error naming the layer's location.
std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key);

}  // namespace crema
