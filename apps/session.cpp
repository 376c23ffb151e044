#include "apps/session.h"

#include <filesystem>

#include "apps/training/data_config.h"
#include "kernels/convolution/select.h"
#include "layers/register_layers.h"
#include "optim/param_groups.h"

namespace crema {

ConfigNode load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  ConfigNode root = load_config(path, overrides);
  std::vector<std::string> implied = data_path_overrides(root);
  for (std::string& o : batch_norm_overrides(root)) implied.push_back(std::move(o));
  if (implied.empty()) return root;
  implied.insert(implied.begin(), overrides.begin(), overrides.end());
  return load_config(path, implied);
}

Session::Session(const CommandOptions& options) : registry(builtin_layers()) {
  root = load_run_config(options.config, options.overrides);
  name = root.get<std::string>("name", std::filesystem::path(options.config).stem().string());
  const int64_t config_seed = root.get<int64_t>("seed", 1);
  seed = options.seed ? *options.seed : uint64_t(config_seed);
  ctx = std::make_unique<Context>(Device::parse(options.device), seed, options.threads);
  algo_cache = options.algo_cache;
  kernels::load_algorithm_cache(algo_cache, ctx->algorithm_cache());
}

}  // namespace crema
