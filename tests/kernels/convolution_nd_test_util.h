// What the N-d convolution tests share on the CPU and the GPU: awkward geometries of each rank
// and a geometry in words for the failure messages.
#pragma once

#include <string>
#include <vector>

#include "kernels/convolution/geometry_nd.h"

namespace crema::kernels::conv_test {

inline std::string describe(const ConvNdGeometry& g) {
  auto list = [&](const std::array<int64_t, 3>& v) {
    std::string s;
    for (int a = 0; a < g.rank; ++a) s += (a ? "," : "") + std::to_string(v[a]);
    return s;
  };
  return std::to_string(g.rank) + "-D N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) +
         " K=" + std::to_string(g.K) + " in=" + list(g.in) + " kernel=" + list(g.kernel) +
         " pad=" + list(g.pad) + " stride=" + list(g.stride) + " dilation=" + list(g.dilation) +
         " groups=" + std::to_string(g.groups);
}

// N = 1, odd extents, stride 2 (and 3), padding, dilation, groups and depthwise, an output of
// extent 1 along an axis, a 1x1x1 filter, and outputs that read only padding.
inline std::vector<ConvNdGeometry> nd_geometries() {
  return {
      // rank N C  K  in          kernel     pad        stride     dilation   groups
      {1, 1, 3, 5, {11}, {3}, {1}, {1}, {1}, 1},
      {1, 2, 4, 6, {13}, {3}, {2}, {2}, {2}, 2},
      {1, 3, 6, 6, {9}, {5}, {2}, {1}, {1}, 6},  // depthwise 1-D
      {1, 2, 3, 4, {7}, {1}, {0}, {3}, {1}, 1},  // pointwise, stride 3
      {2, 2, 3, 5, {7, 9}, {3, 2}, {1, 0}, {2, 1}, {1, 2}, 1},
      {3, 1, 3, 5, {5, 7, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1},
      {3, 2, 4, 6, {7, 6, 9}, {3, 2, 3}, {1, 0, 2}, {2, 1, 2}, {1, 2, 2}, 2},
      {3, 3, 2, 3, {4, 5, 5}, {2, 3, 1}, {0, 1, 0}, {1, 2, 3}, {2, 1, 1}, 1},
      {3, 2, 4, 4, {5, 5, 6}, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {1, 1, 1}, 4},  // depthwise 3-D
      {3, 1, 5, 7, {3, 4, 5}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1},  // 1x1x1
      {3, 1, 2, 3, {2, 3, 3}, {2, 3, 3}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1},  // out 1x1x1
      {3, 1, 2, 3, {2, 2, 2}, {3, 3, 3}, {3, 3, 3}, {3, 3, 2}, {1, 1, 1}, 1},  // padding only
      {3, 4, 3, 8, {4, 9, 8}, {3, 3, 3}, {1, 1, 1}, {1, 2, 2}, {1, 1, 1}, 1},  // C3D-like
  };
}

}  // namespace crema::kernels::conv_test
