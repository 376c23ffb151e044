// Helpers for the channels-last (nhwc) kernel tests: a host tensor rewritten in the other memory
// order, so that an op run on nhwc tensors can be checked against the same op on nchw ones (the
// oracle the rest of the suite already trusts), element for element at the same logical index.
#pragma once

#include <cstring>

#include "core/tensor.h"

namespace crema::kernels::testing {

// The offset of logical element (n, c, h, w) of an [N, C, H, W] tensor stored in `layout`.
inline int64_t element_offset(const Shape& s, Layout layout, int64_t n, int64_t c, int64_t h,
                              int64_t w) {
  return layout == Layout::nhwc ? ((n * s[2] + h) * s[3] + w) * s[1] + c
                                : ((n * s[1] + c) * s[2] + h) * s[3] + w;
}

// A host copy of the 4-D host tensor `x` (any dtype) with the same logical shape and values,
// its memory in `layout`.
inline Tensor in_layout(const Tensor& x, Layout layout) {
  Tensor y(x.shape(), x.dtype());
  y.set_layout(layout);
  const Shape& s = x.shape();
  const size_t size = dtype_size(x.dtype());
  const auto* from = static_cast<const unsigned char*>(x.raw());
  auto* to = static_cast<unsigned char*>(y.raw());
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t h = 0; h < s[2]; ++h) {
        for (int64_t w = 0; w < s[3]; ++w) {
          std::memcpy(to + size_t(element_offset(s, layout, n, c, h, w)) * size,
                      from + size_t(element_offset(s, x.layout(), n, c, h, w)) * size, size);
        }
      }
    }
  }
  return y;
}

}  // namespace crema::kernels::testing
