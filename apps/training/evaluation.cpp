#include "apps/training/evaluation.h"

#include <fmt/format.h>

#include "apps/training/checkpoint.h"
#include "apps/training/input_feeder.h"
#include "core/error.h"

namespace crema {

namespace {

// The layer of `net` before layer `before` whose config writes `blob` ("" when none does).
std::string producer_of(Net& net, size_t before, const std::string& blob) {
  std::string producer;
  for (size_t j = 0; j < before; ++j) {
    const ConfigNode* node = net.layer(j).spec().node;
    if (node == nullptr || !node->has("top")) continue;
    for (const std::string& top : node->get_list<std::string>("top")) {
      if (top == blob) producer = net.layer(j).name();
    }
  }
  return producer;
}

// Each SoftmaxWithLoss and Accuracy that reads the loader's labels: the class axis of its scores
// must have a place for every class of the source, or training would fail at the first batch
// holding a label past it, deep inside a kernel.
void check_classes_fit(Net& net, const data::DataLoader& loader) {
  const int64_t classes = loader.dataset().num_classes();
  if (classes <= 0) return;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const Layer& layer = net.layer(i);
    const ConfigNode* node = layer.spec().node;
    if (node == nullptr || (layer.type() != "SoftmaxWithLoss" && layer.type() != "Accuracy")) {
      continue;
    }
    const std::vector<std::string> bottoms = node->get_list<std::string>("bottom");
    if (bottoms.size() != 2 || bottoms[1] != "label" || !net.has_blob(bottoms[0])) continue;
    const Shape& scores = net.blob(bottoms[0]).value.shape();
    const int axis = node->has("axis") ? node->get<int>("axis") : 1;
    if (axis < 0 || size_t(axis) >= scores.size() || scores[size_t(axis)] >= classes) continue;
    const std::string producer = producer_of(net, i, bottoms[0]);
    node->fail(fmt::format(
        "layer '{}' ({}) scores {} classes ('{}' is {}) but {} has {} (labels 0..{}); give {} "
        "{} outputs (num_output: {})",
        layer.name(), layer.type(), scores[size_t(axis)], bottoms[0], shape_str(scores),
        loader.dataset().description(), classes, classes - 1,
        producer.empty() ? "the layer producing '" + bottoms[0] + "'" : "layer '" + producer + "'",
        classes, classes));
  }
}

}  // namespace

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
  check_classes_fit(net, loader);
}

std::string classifier_of(Net& net) {
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const ConfigNode* node = net.layer(i).spec().node;
    if (net.layer(i).type() == "SoftmaxWithLoss" && node != nullptr) {
      return producer_of(net, i, node->get_list<std::string>("bottom").at(0));
    }
  }
  return "";
}

std::string load_all_weights(Net& net, const std::string& weights) {
  const WeightsReport report = copy_weights_by_name(net, weights);
  require_all_weights(weights, report);
  return report.notes;
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
