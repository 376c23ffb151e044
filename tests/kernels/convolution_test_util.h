// What every convolution test shares, on the CPU and on the GPU: a geometry in words, for the
// failure messages.
#pragma once

#include <string>

#include "kernels/convolution/geometry.h"

namespace crema::kernels::conv_test {

inline std::string describe(const Conv2dGeometry& g) {
  return "N=" + std::to_string(g.N) + " C=" + std::to_string(g.C) + " H=" + std::to_string(g.H) +
         " W=" + std::to_string(g.W) + " K=" + std::to_string(g.K) + " R=" + std::to_string(g.R) +
         " S=" + std::to_string(g.S) + " pad=" + std::to_string(g.pad_h) + "," +
         std::to_string(g.pad_w) + " stride=" + std::to_string(g.stride_h) + "," +
         std::to_string(g.stride_w) + " dilation=" + std::to_string(g.dilation_h) + "," +
         std::to_string(g.dilation_w) + " groups=" + std::to_string(g.groups);
}

}  // namespace crema::kernels::conv_test
