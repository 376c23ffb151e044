// Shared by the CPU and CUDA pooling tests.
#pragma once

#include <string>

#include "kernels/pooling/pooling.h"

namespace crema::kernels::testing {

// A square-window geometry with the output size pool2d_output_extent gives.
inline Pool2dGeometry geometry(int64_t N, int64_t C, int64_t H, int64_t W, int64_t k, int64_t s,
                               int64_t pad, bool ceil_mode) {
  return {N,
          C,
          H,
          W,
          k,
          k,
          s,
          s,
          pad,
          pad,
          pool2d_output_extent(H, k, s, pad, ceil_mode),
          pool2d_output_extent(W, k, s, pad, ceil_mode)};
}

inline std::string describe(const Pool2dGeometry& g) {
  return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " H=" + std::to_string(g.H) +
         " W=" + std::to_string(g.W) + " k=" + std::to_string(g.kernel_h) + "x" +
         std::to_string(g.kernel_w) + " s=" + std::to_string(g.stride_h) + "x" +
         std::to_string(g.stride_w) + " pad=" + std::to_string(g.pad_h) + "x" +
         std::to_string(g.pad_w) + " P=" + std::to_string(g.P) + " Q=" + std::to_string(g.Q);
}

}  // namespace crema::kernels::testing
