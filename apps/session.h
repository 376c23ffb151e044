// Session: what every command starts from -- the resolved config, the run's name and seed, the
// Context on the chosen device, and the layer types -- and the evaluation pieces the train and
// test commands share.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/commands.h"
#include "core/config.h"
#include "core/context.h"
#include "core/net.h"
#include "core/registry.h"
#include "data/loader.h"

namespace crema {

struct Session {
  ConfigNode root;
  std::string name;
  uint64_t seed = 1;
  std::unique_ptr<Context> ctx;
  LayerRegistry registry;

  std::string algo_cache;  // --algo-cache: the file the context's algorithm choices live in

  // Loads options.config with its overrides, opens the device (errors name what is wrong) and
  // loads the --algo-cache file into the context when it exists.
  explicit Session(const CommandOptions& options);
  // Writes the context's algorithm choices to the --algo-cache file (none: does nothing).
  void save_algorithm_cache() const;
};

// Checks that the net declares the inputs `data` and `label` and that `data` has the shape of the
// loader's samples (the error points at model.inputs).
void check_inputs(Net& net, const data::DataLoader& loader, const ConfigNode& model);

// One pass over the whole test set; each output (accuracy, loss) is averaged over samples.
// `after_batch`, when given, runs after each batch's forward (to read blobs out).
std::vector<std::pair<std::string, double>> run_test(
    Net& net, data::DataLoader& loader, Context& ctx,
    const std::function<void(Net&)>& after_batch = nullptr);

// "accuracy=0.9085 loss=0.2681"
std::string format_outputs(const std::vector<std::pair<std::string, double>>& outputs);

}  // namespace crema
