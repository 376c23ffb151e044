// Session: what every command starts from -- the resolved config, the run's name and seed, the
// Context on the chosen device, and the layer types. The test pass the train and test commands
// share is apps/training/evaluation.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "core/config.h"
#include "core/context.h"
#include "core/registry.h"

namespace crema {

struct Session {
  ConfigNode root;
  std::string name;
  uint64_t seed = 1;
  std::unique_ptr<Context> ctx;
  LayerRegistry registry;

  // --algo-cache: the file the context's algorithm choices live in (empty: none); the commands
  // write it back with kernels::save_algorithm_cache (kernels/convolution/select.h).
  std::string algo_cache;

  // Loads options.config with its overrides, opens the device (errors name what is wrong) and
  // loads the --algo-cache file into the context when it exists.
  explicit Session(const CommandOptions& options);
};

}  // namespace crema
