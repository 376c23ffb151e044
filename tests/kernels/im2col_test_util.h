// Shared by the CPU and CUDA im2col tests.
#pragma once

#include <vector>

#include "kernels/im2col/im2col.h"

namespace crema::kernels::testing {

// Awkward geometries: padding wider than the window reach, strides that skip pixels, dilation,
// rectangular windows, a single output row/column, a 1x1 window, and LeNet's conv2.
inline std::vector<Im2colGeometry> geometries() {
  return {
      // C  H   W  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w
      {1, 3, 3, 2, 2},
      {3, 7, 9, 3, 3, 1, 1},
      {2, 11, 10, 3, 2, 2, 1, 2, 3},
      {3, 9, 13, 3, 3, 2, 2, 1, 1, 2, 2},
      {2, 5, 6, 5, 2, 0, 0, 1, 5},  // P = Q = 1
      {4, 5, 3, 1, 1},
      {1, 4, 4, 3, 3, 3, 3, 3, 2},  // whole rows and columns read only padding
      {20, 12, 12, 5, 5},           // LeNet's conv2
  };
}

}  // namespace crema::kernels::testing
