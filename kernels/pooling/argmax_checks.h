// What the fixed-window and adaptive pooling dispatches (pooling.cpp, adaptive_pooling.cpp) check
// alike about max pooling's argmax: present exactly where it is used, the right shape and dtype,
// and a plane small enough for its float32 indices.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/pooling/pooling.h"

namespace crema::kernels::pooling_detail {

// argmax holds plane indices in float32, exact up to 2^24.
inline void check_argmax_plane(const char* op, PoolMode mode, int64_t H, int64_t W) {
  if (mode == PoolMode::max && H * W > (int64_t(1) << 24)) {
    throw Error(std::string(op) + ": a " + std::to_string(H) + "x" + std::to_string(W) +
                " plane is too large for float32 argmax indices (at most 2^24 elements)");
  }
}

// Forward: argmax is optional for max pooling and refused for average pooling.
// Backward (`needed`): max pooling needs the forward's argmax.
inline void check_argmax(Context& ctx, const char* op, PoolMode mode, const Tensor* argmax,
                         const Shape& shape, DType dtype, bool needed) {
  if (mode == PoolMode::average) {
    if (argmax != nullptr) {
      throw Error(std::string(op) + ": average pooling has no argmax; pass nullptr");
    }
    return;
  }
  if (argmax == nullptr) {
    if (needed) throw Error(std::string(op) + ": max pooling needs the forward's argmax");
    return;
  }
  check_tensor(ctx, op, "argmax", *argmax, shape, dtype);
}

// The argmax indices (max pooling), or null (average pooling).
template <class T, class Argmax>
auto indices_of(Argmax* argmax) {
  return argmax != nullptr ? argmax->template data<T>() : nullptr;
}

}  // namespace crema::kernels::pooling_detail
