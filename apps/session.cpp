#include "apps/session.h"

#include <filesystem>

#include <fmt/format.h>

#include "apps/input_feeder.h"
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
  if (!algo_cache.empty()) kernels::load_algorithm_cache(algo_cache, ctx->algorithm_cache());
}

void Session::save_algorithm_cache() const {
  if (!algo_cache.empty()) kernels::save_algorithm_cache(algo_cache, ctx->algorithm_cache());
}

void check_inputs(Net& net, const data::DataLoader& loader, const ConfigNode& model) {
  if (!net.has_blob("data") || !net.has_blob("label")) {
    model.at("inputs").fail(
        "model.inputs must declare 'data' and 'label': the data loader feeds "
        "its images and labels into them");
  }
  const Shape& declared =
      net.inputs()[0].first == "data" ? net.inputs()[0].second : net.inputs()[1].second;
  if (declared != loader.sample_shape()) {
    model.at("inputs").at("data").fail("model.inputs.data is " + shape_str(declared) +
                                       " but the samples of " + loader.dataset().description() +
                                       " are " + shape_str(loader.sample_shape()) +
                                       " after the transforms");
  }
}

std::vector<std::pair<std::string, double>> run_test(Net& net, data::DataLoader& loader,
                                                     Context& ctx,
                                                     const std::function<void(Net&)>& after_batch) {
  loader.start_epoch(0);
  InputFeeder feeder(ctx);
  std::vector<std::pair<std::string, double>> sums;
  int64_t samples = 0;
  feeder.stage(loader.next());
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    feeder.feed(net);
    const int64_t n = net.batch_size();
    if (b + 1 < loader.batches_per_epoch()) feeder.stage(loader.next());
    net.forward(ctx);
    if (after_batch) after_batch(net);
    const auto outputs = net.outputs();
    if (sums.empty()) {
      for (const auto& [name, value] : outputs) sums.emplace_back(name, 0.0);
    }
    for (size_t i = 0; i < outputs.size(); ++i) sums[i].second += outputs[i].second * double(n);
    samples += n;
  }
  for (auto& entry : sums) entry.second /= double(samples);
  return sums;
}

std::string format_outputs(const std::vector<std::pair<std::string, double>>& outputs) {
  std::string text;
  for (const auto& [name, value] : outputs) {
    text += fmt::format("{}{}={:.4f}", text.empty() ? "" : " ", name, value);
  }
  return text;
}

}  // namespace crema
