#include "kernels/common/dispatch.h"

namespace crema::kernels {

namespace detail {

std::string impl_description(DType dtype, Layout layout, const char* where) {
  return std::string(dtype_name(dtype)) + " " + layout_name(layout) + " on " + where;
}

void no_implementation(const Context& ctx, const char* op, DType dtype, Layout layout,
                       const std::string& implemented) {
  throw Error(std::string(op) + ": no implementation for " + dtype_name(dtype) + " " +
              layout_name(layout) + " on " + ctx.device().str() + " (implemented: " + implemented +
              ")");
}

}  // namespace detail
}  // namespace crema::kernels
