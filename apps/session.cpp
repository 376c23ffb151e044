#include "apps/session.h"

#include <filesystem>

#include "kernels/convolution/select.h"
#include "layers/register_layers.h"

namespace crema {

Session::Session(const CommandOptions& options) : registry(builtin_layers()) {
  root = load_config(options.config, options.overrides);
  name = root.get<std::string>("name", std::filesystem::path(options.config).stem().string());
  const int64_t config_seed = root.get<int64_t>("seed", 1);
  seed = options.seed ? *options.seed : uint64_t(config_seed);
  ctx = std::make_unique<Context>(Device::parse(options.device), seed, options.threads);
  algo_cache = options.algo_cache;
  kernels::load_algorithm_cache(algo_cache, ctx->algorithm_cache());
}

}  // namespace crema
