// crema predict: a trained net on image files, the top-k classes of each with their probabilities.
//
//   crema predict CONFIG --weights W IMAGE... [--top-k 5] [--labels FILE] [--json]
//
// Each image is decoded with the channels of model.inputs.data, passed through the config's test
// transforms (data.test.transform; none without data.test) and must then have the shape
// model.inputs.data declares. The net is built in the test phase (inference: batch norm uses its
// running statistics, dropout passes through) and loaded from W by name, every tensor required.
// Any other input (label) is fed zeros, so a training config works as it is.
//
// The scores: the first bottom of the net's SoftmaxWithLoss layer (the logits the loss reads); in
// a net without one (an inference config), the first top of its last layer. Probabilities are the
// softmax of the scores, computed here in double, unless that last layer is a Softmax: its outputs
// are taken as they are.
//
// Class names: --labels FILE (one per line), else the run's list kept with W (state.json of its
// checkpoint directory, or classes.txt: apps/training/class_list.h), else the labels as numbers.
// A list whose length is not the number of scores is an error. A bad image names its path.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/session.h"
#include "apps/training/class_list.h"
#include "apps/training/data_config.h"
#include "apps/training/evaluation.h"
#include "core/error.h"
#include "core/net.h"
#include "data/image.h"

namespace crema {
namespace {

constexpr int64_t kMaxBatch = 32;

// Where the net's scores are read, and whether they are probabilities already.
struct ScoreBlob {
  std::string name;
  bool probabilities = false;
};

ScoreBlob score_blob(Net& net) {
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const Layer& layer = net.layer(i);
    if (layer.type() == "SoftmaxWithLoss" && layer.spec().node != nullptr) {
      return {layer.spec().node->get_list<std::string>("bottom").at(0), false};
    }
  }
  const Layer& last = net.layer(net.num_layers() - 1);
  return {last.spec().tops.at(0), last.type() == "Softmax"};
}

// The name of the input the images go into: `data`, else the first input.
std::string image_input(const Net& net) {
  for (const auto& [name, shape] : net.inputs()) {
    if (name == "data") return name;
  }
  return net.inputs().at(0).first;
}

std::vector<double> probabilities_of(const float* scores, int64_t count, bool already) {
  std::vector<double> p(scores, scores + count);
  if (already) return p;
  const double top = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& v : p) sum += (v = std::exp(v - top));
  for (double& v : p) v /= sum;
  return p;
}

std::vector<std::string> class_names(const CommandOptions& options, int64_t count) {
  ClassList list = options.labels.empty() ? classes_of_weights(options.weights)
                                          : read_class_file(options.labels);
  if (list.names.empty()) {
    for (int64_t k = 0; k < count; ++k) list.names.push_back(std::to_string(k));
    return list.names;
  }
  if (int64_t(list.names.size()) != count) {
    throw Error(fmt::format("{} names {} classes but the net scores {}", list.origin,
                            list.names.size(), count));
  }
  return list.names;
}

void print_text(const std::vector<Prediction>& predictions, std::ostream& out) {
  for (const Prediction& p : predictions) {
    out << p.image << "\n";
    for (size_t k = 0; k < p.top.size(); ++k) {
      out << fmt::format("  {:>2}  {:.4f}  {} ({})\n", k + 1, p.top[k].probability, p.top[k].name,
                         p.top[k].label);
    }
  }
}

void print_json(const std::vector<Prediction>& predictions, std::ostream& out) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Prediction& p : predictions) {
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const Prediction::Class& c : p.top) {
      top.push_back({{"label", c.label}, {"class", c.name}, {"probability", c.probability}});
    }
    all.push_back({{"image", p.image}, {"top", top}});
  }
  out << all.dump(2) << "\n";
}

}  // namespace

std::vector<Prediction> predict_command(const CommandOptions& options, std::ostream& out) {
  if (options.weights.empty()) throw Error("crema predict needs --weights FILE");
  if (options.images.empty()) throw Error("crema predict needs at least one image file");
  if (options.top_k < 1) throw Error("--top-k must be at least 1");
  Session s(options);
  Context& ctx = *s.ctx;
  std::vector<std::shared_ptr<const data::Transform>> transforms;
  if (s.root.has("data") && s.root.at("data").has("test") &&
      s.root.at("data").at("test").has("transform")) {
    transforms = read_transforms(s.root.at("data").at("test").at("transform"));
  }
  const int64_t batch = std::min<int64_t>(kMaxBatch, int64_t(options.images.size()));
  Net net(s.root.at("model"), Phase::test, batch, s.registry, ctx);
  load_all_weights(net, options.weights);
  const std::string input = image_input(net);
  const Shape sample = [&] {
    for (const auto& [name, shape] : net.inputs()) {
      if (name == input) return shape;
    }
    return Shape{};
  }();
  if (sample.size() != 3 || (sample[0] != 1 && sample[0] != 3)) {
    throw Error("crema predict feeds images of 1 or 3 channels, but model.inputs." + input +
                " is " + shape_str(sample));
  }
  const ScoreBlob scores = score_blob(net);
  net.keep(scores.name);  // read after forward: the memory plan must not reuse it
  const int64_t classes = net.blob(scores.name).value.numel() / batch;
  const std::vector<std::string> names = class_names(options, classes);
  const int64_t k_top = std::min<int64_t>(options.top_k, classes);

  std::vector<Prediction> predictions;
  data::Image image;
  for (size_t first = 0; first < options.images.size(); first += size_t(batch)) {
    const int64_t n = std::min<int64_t>(batch, int64_t(options.images.size() - first));
    net.set_batch_size(n, ctx);
    Shape batch_shape = sample;
    batch_shape.insert(batch_shape.begin(), n);
    Tensor pixels(batch_shape);
    for (int64_t i = 0; i < n; ++i) {
      const std::string& path = options.images[first + size_t(i)];
      data::read_image_file(path, int(sample[0]), image);
      Random random(s.seed);
      for (const auto& t : transforms) t->apply(image, random);
      if (image.shape != sample) {
        throw Error(path + ": " + shape_str(image.shape) +
                    " after the test transforms, but model.inputs." + input + " is " +
                    shape_str(sample));
      }
      std::copy(image.pixels.begin(), image.pixels.end(),
                pixels.data<float>() + i * shape_numel(sample));
    }
    for (const auto& [name, shape] : net.inputs()) {
      if (name != input) ctx.fill(net.blob(name).value, 0.0f);
    }
    net.blob(input).value.copy_from(pixels);
    net.forward(ctx);
    const std::vector<float> values = net.blob(scores.name).value.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> p =
          probabilities_of(values.data() + i * classes, classes, scores.probabilities);
      std::vector<int64_t> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
      Prediction prediction{options.images[first + size_t(i)], {}};
      for (int64_t k = 0; k < k_top; ++k) {
        const int64_t label = order[size_t(k)];
        prediction.top.push_back({label, names[size_t(label)], p[size_t(label)]});
      }
      predictions.push_back(std::move(prediction));
    }
  }
  if (options.json) {
    print_json(predictions, out);
  } else {
    print_text(predictions, out);
  }
  return predictions;
}

}  // namespace crema
