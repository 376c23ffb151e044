// What the N-d pooling tests share on the CPU and the GPU: awkward geometries of rank 1 and 3.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "kernels/pooling/pooling_nd.h"

namespace crema::kernels::pool_test {

// Outputs by pool2d_output_extent per axis (floor, or Caffe's ceil).
inline PoolNdGeometry make_pool(int rank, int64_t N, int64_t C, std::array<int64_t, 3> in,
                                std::array<int64_t, 3> kernel, std::array<int64_t, 3> stride,
                                std::array<int64_t, 3> pad, bool ceil_mode,
                                bool count_include_pad) {
  PoolNdGeometry g{rank, N, C, in, kernel, stride, pad, {}, count_include_pad};
  for (int a = 0; a < rank; ++a) {
    g.out[a] = pool2d_output_extent(in[a], kernel[a], stride[a], pad[a], ceil_mode);
  }
  return g;
}

inline std::string describe(const PoolNdGeometry& g) {
  auto list = [&](const std::array<int64_t, 3>& v) {
    std::string s;
    for (int a = 0; a < g.rank; ++a) s += (a ? "," : "") + std::to_string(v[a]);
    return s;
  };
  return std::to_string(g.rank) + "-D N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) +
         " in=" + list(g.in) + " kernel=" + list(g.kernel) + " stride=" + list(g.stride) +
         " pad=" + list(g.pad) + " out=" + list(g.out) +
         (g.count_include_pad ? "" : " count_include_pad=false");
}

// Odd extents, overlapping and gapped windows, padding (with and without count_include_pad),
// ceil rounding with a clipped last window, N = 1, windows as large as the input.
inline std::vector<PoolNdGeometry> pool_geometries() {
  return {
      make_pool(1, 2, 3, {11}, {3}, {2}, {1}, false, true),
      make_pool(1, 1, 2, {10}, {4}, {3}, {2}, true, false),
      make_pool(1, 3, 1, {7}, {2}, {3}, {0}, false, true),  // gaps between windows
      make_pool(2, 2, 2, {7, 6}, {3, 2}, {2, 2}, {1, 0}, true, true),
      make_pool(3, 2, 3, {5, 7, 6}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false, true),
      make_pool(3, 1, 2, {5, 7, 9}, {3, 3, 3}, {2, 1, 2}, {1, 1, 1}, false, true),
      make_pool(3, 2, 2, {4, 7, 6}, {3, 3, 2}, {2, 2, 2}, {1, 1, 1}, true, false),
      make_pool(3, 1, 3, {3, 4, 5}, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, false, true),  // C3D pool1
      make_pool(3, 2, 1, {3, 4, 5}, {3, 4, 5}, {1, 1, 1}, {0, 0, 0}, false, true),  // global
  };
}

}  // namespace crema::kernels::pool_test
