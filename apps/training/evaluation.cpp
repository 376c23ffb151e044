#include "apps/training/evaluation.h"

#include <fmt/format.h>

#include "apps/training/input_feeder.h"

namespace crema {

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

void update_best(std::optional<BestMetric>& best, const LoopSettings& loop,
                 const std::vector<std::pair<std::string, double>>& results, int64_t done) {
  if (loop.keep_best.empty()) return;
  double value = 0.0;
  for (const auto& [name, v] : results) {
    if (name == loop.keep_best) value = v;
  }
  const bool better = !best || (loop.keep_best_max ? value > best->value : value < best->value);
  if (better) {
    best = BestMetric{loop.keep_best, loop.keep_best_max, value, done,
                      fmt::format("iter_{:06d}", done)};
  }
}

}  // namespace crema
