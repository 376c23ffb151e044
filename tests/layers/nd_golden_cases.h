// The cases of tests/fixtures/nd_golden.safetensors (make_nd_fixtures.py) as crema layers: each
// case's YAML stands for the PyTorch call of the same name there.
#pragma once

#include <string>
#include <vector>

#include "tests/fixtures/safetensors_fixture.h"

namespace crema::testing {

inline const SafetensorsFixture& nd_fixture() {
  static const SafetensorsFixture fixture("nd_golden.safetensors");
  return fixture;
}

struct NdGoldenCase {
  std::string name, yaml;
  int num_tops = 1;  // 2: max pooling with its argmax top
};

inline std::vector<NdGoldenCase> nd_golden_cases() {
  const std::string conv = "{name: c, type: Convolution, ";
  const std::string pool = "{name: p, type: Pooling, ";
  return {
      {"conv1d", conv + "num_output: 6, kernel_size: 3, stride: 2, pad: 2, dilation: 2, group: 2}"},
      {"conv3d", conv + "num_output: 4, kernel_size: [3, 2, 3], stride: [1, 2, 2], pad: [1, 0, 1],"
                        " dilation: [2, 1, 1]}"},
      {"conv3d_grouped", conv + "num_output: 4, kernel_size: 3, stride: 2, pad: 1, group: 2}"},
      {"maxpool3d", pool + "pool: max, kernel_size: [2, 3, 2], stride: [1, 2, 2], pad: [1, 1, 0]}",
       2},
      {"maxpool1d", pool + "pool: max, kernel_size: 3, stride: 2, pad: 1, round_mode: floor}", 2},
      {"avgpool3d", pool + "pool: average, kernel_size: 3, stride: 2, pad: 1, round_mode: floor}"},
      {"avgpool3d_exclude_pad", pool + "pool: average, kernel_size: [2, 3, 3], stride: 2,"
                                       " pad: [1, 1, 0], count_include_pad: false}"},
      {"avgpool1d",
       pool + "pool: average, kernel_size: 3, stride: 2, pad: 1, count_include_pad: false}"},
      {"avgpool1d_include_pad", pool + "pool: average, kernel_size: 4, stride: 3, pad: 2}"},
  };
}

}  // namespace crema::testing
