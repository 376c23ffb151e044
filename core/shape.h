// Shape: the extents of a tensor, outermost first (N, C, H, W for images).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crema {

using Shape = std::vector<int64_t>;

// Number of elements (1 for a scalar shape {}).
int64_t shape_numel(const Shape& shape);
// Product of the extents in [begin, end).
int64_t shape_count(const Shape& shape, int begin, int end);
// "[64, 1, 28, 28]"
std::string shape_str(const Shape& shape);

}  // namespace crema
