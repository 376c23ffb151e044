// Shared by the CPU and CUDA pooling tests.
#pragma once

#include <string>
#include <vector>

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

// The channels-last cases of the CPU and CUDA tests: N = 1, C not a multiple of 8 (3, 13) and
// 64, odd H and W, stride 2 with padding, overlapping and gapped windows, global pooling.
inline std::vector<Pool2dGeometry> nhwc_geometries() {
  return {
      geometry(1, 3, 7, 9, 2, 2, 0, true),     // partial last windows
      geometry(2, 13, 13, 11, 3, 2, 1, true),  // stride 2, padding, overlap (ResNet's max pool)
      geometry(1, 64, 9, 9, 3, 1, 1, false),   // stride 1: nine windows per element
      geometry(2, 5, 11, 13, 2, 3, 1, true),   // gaps between windows
      geometry(3, 13, 7, 7, 7, 1, 0, false),   // global (ResNet's average pool)
      geometry(2, 1, 2, 2, 3, 2, 1, true),     // every window clipped
  };
}

inline std::string describe(const Pool2dGeometry& g) {
  return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " H=" + std::to_string(g.H) +
         " W=" + std::to_string(g.W) + " k=" + std::to_string(g.kernel_h) + "x" +
         std::to_string(g.kernel_w) + " s=" + std::to_string(g.stride_h) + "x" +
         std::to_string(g.stride_w) + " pad=" + std::to_string(g.pad_h) + "x" +
         std::to_string(g.pad_w) + " P=" + std::to_string(g.P) + " Q=" + std::to_string(g.Q);
}

}  // namespace crema::kernels::testing
