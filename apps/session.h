// Session: what every command starts from -- the resolved config, the run's name and seed, the
// Context on the chosen device, and the layer types. The test pass the train and test commands
// share is apps/training/evaluation.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/config.h"
#include "core/context.h"
#include "core/registry.h"

namespace crema {

// Loads a config as every command reads it: `path` with its `_base_` files and `overrides`, then
// the overrides the config implies -- relative data paths made absolute from the folder of the
// file that wrote them (data_path_overrides, apps/training/data_config.h), and
// solver.freeze_batch_norm's use_global_stats (batch_norm_overrides, optim/param_groups.h).
ConfigNode load_run_config(const std::string& path, const std::vector<std::string>& overrides);

struct Session {
  ConfigNode root;
  std::string name;
  uint64_t seed = 1;
  std::unique_ptr<Context> ctx;
  LayerRegistry registry;

  // --algo-cache: the file the context's algorithm choices live in (empty: none); the commands
  // write it back with kernels::save_algorithm_cache (kernels/convolution/select.h).
  std::string algo_cache;

  // Loads options.config with its overrides (load_run_config), opens the device (errors name what
  // is wrong) and loads the --algo-cache file into the context when it exists.
  explicit Session(const CommandOptions& options);
};

}  // namespace crema
