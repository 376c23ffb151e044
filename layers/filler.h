// Fillers: how a parameter gets its initial values (Caffe's names and definitions).
//
//   constant  value (default 0)
//   uniform   U(min, max) (defaults 0, 1)
//   gaussian  N(mean, std) (defaults 0, 0.01)
//   xavier    U(-a, a), a = sqrt(3 / n)           Glorot & Bengio 2010, as Caffe defines it
//   msra      N(0, sqrt(2 / n))                   He et al. 2015
// where n is fan_in = numel / shape[0] (default), fan_out = numel / shape[1], or their average,
// chosen by variance_norm: fan_in | fan_out | average.
#pragma once

#include <string>

#include "core/config.h"
#include "core/random.h"
#include "core/tensor.h"

namespace crema {

struct FillerSpec {
  std::string type = "constant";
  double value = 0.0;
  double min = 0.0, max = 1.0;
  double mean = 0.0, std = 0.01;
  std::string variance_norm = "fan_in";
};

// Reads `key` of a layer's node (e.g. weight_filler: {type: xavier}); `fallback` when absent.
FillerSpec read_filler(const ConfigNode& layer, const std::string& key, const FillerSpec& fallback);
// Fills a tensor on any device (the first axis is the output axis, as in [K, C, R, S] and
// [N_out, N_in]); the values depend only on the generator's state, not on the device.
void fill_tensor(const FillerSpec& spec, Random& random, Tensor& tensor);

}  // namespace crema
