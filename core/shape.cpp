#include "core/shape.h"

namespace crema {

int64_t shape_numel(const Shape& shape) { return shape_count(shape, 0, int(shape.size())); }

int64_t shape_count(const Shape& shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= shape[i];
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace crema
