// Reading `data.train` / `data.test` into a DataLoader.
//
//   data:
//     train:
//       source: {format: idx, images: path.gz, labels: path.gz}
//       batch_size: 64
//       shuffle: true          # default: true for train, false for test
//       drop_last: true        # default: true for train, false for test
//       transform: [{scale: 0.00390625}, {mean: 0.286}, {std: [0.353]}]
//       workers: 1             # background threads assembling batches
//       prefetch: 4            # batches prepared ahead
//
// Relative paths are taken from the directory crema runs in. Data formats: idx (more in
// data/README.md).
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "data/loader.h"

namespace crema {

// Builds the loader of `split` ("train" or "test"); the seed drives the shuffling.
std::unique_ptr<data::DataLoader> make_loader(const ConfigNode& data, const std::string& split,
                                              uint64_t seed);

}  // namespace crema
