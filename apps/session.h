// Session: what every command starts from -- the resolved config, the run's name and seed, the
// Context on the chosen device, and the layer types.
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

  // Loads options.config with its overrides and opens the device (errors name what is wrong).
  explicit Session(const CommandOptions& options);
};

}  // namespace crema
