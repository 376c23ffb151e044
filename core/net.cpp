#include "core/net.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/net_fusion.h"
#include "core/net_precision.h"
#include "core/shape.h"

namespace crema {
namespace {

// Where a blob version comes from: a layer's top, or an input (layer == -1).
struct Producer {
  int layer;
  int top;
  bool operator<(const Producer& o) const {
    return layer != o.layer ? layer < o.layer : top < o.top;
  }
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

Net::Net(const ConfigNode& model, Phase phase, int64_t batch_size, const LayerRegistry& registry,
         Context& ctx, const Device* plan_for)
    : model_(model),
      phase_(phase),
      batch_size_(batch_size),
      allocator_(&ctx.allocator()),
      device_(ctx.device()),
      runs_on_(plan_for != nullptr ? *plan_for : ctx.device()) {
  if (batch_size_ <= 0)
    throw Error("batch size must be positive, got " + std::to_string(batch_size));
  memory_plan_ = model_.is_map() && model_.get<bool>("memory_plan", true);
  // concat_views: true (views where they do not grow the arena), false, or always (every view
  // the rules allow, whatever it costs: core/VIEWS.md).
  if (model_.is_map() && model_.has("concat_views") && model_.at("concat_views").is_scalar() &&
      model_.at("concat_views").scalar() == "always") {
    views_always_ = true;
  } else {
    concat_views_ = model_.is_map() && model_.get<bool>("concat_views", true);
  }
  precision_ = read_net_precision(model_, runs_on_);
  std::vector<LayerSpec> specs = read_layer_specs(model_);
  fuse_layers(model_, specs);
  insert_splits(specs);
  build(std::move(specs), registry, ctx);
  model_.check_no_unknown_keys("model");
  // The shared workspace at the size the largest layer takes, once, before the first step: grown
  // pass by pass instead, it would keep every outgrown size alive with it (Context::workspace).
  if (plan_for == nullptr) {
    const int64_t workspace = largest_workspace();
    if (workspace > 0) ctx.workspace(size_t((workspace + 3) / 4));
  }
}

std::vector<LayerSpec> Net::read_layer_specs(const ConfigNode& model) {
  if (!model.is_map()) model.fail("model: expected a map with 'inputs' and 'layers'");
  const ConfigNode& inputs = model.at("inputs");
  if (!inputs.is_map())
    inputs.fail("model.inputs: expected a map such as {data: [1, 28, 28], label: []}");
  for (const std::string& name : inputs.keys()) {
    const ConfigNode& dims = inputs.at(name);
    if (!dims.is_sequence() && !dims.is_null()) {
      dims.fail("model.inputs." + name +
                ": expected a list of per-sample dimensions, e.g. [1, 28, 28]");
    }
    Shape shape;
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t extent = dims[i].as<int64_t>();
      if (extent <= 0) dims[i].fail("model.inputs." + name + ": dimensions must be positive");
      shape.push_back(extent);
    }
    inputs_.emplace_back(name, shape);
  }

  // model.math: the net's default arithmetic for products, handed to each layer in its spec (a
  // layer's own `math:` key wins; layers/layer_keys.h reads both); model.precision's when absent.
  const std::string math = model.get<std::string>("math", default_math(precision_.precision));
  if (math != "fp32" && math != "tf32" && math != "bf16") {
    model.at("math").fail("model.math: unknown math '" + math + "'; choose from fp32, tf32, bf16");
  }

  const bool sync_batch_norm = model.get<bool>("sync_batch_norm", false);

  const ConfigNode& layers = model.at("layers");
  if (!layers.is_sequence()) layers.fail("model.layers: expected a list of layers");
  std::vector<LayerSpec> specs;
  std::set<std::string> names;
  for (size_t i = 0; i < layers.size(); ++i) {
    const ConfigNode& node = layers[i];
    if (!node.is_map()) node.fail("model.layers[" + std::to_string(i) + "]: expected a map");
    LayerSpec spec;
    spec.name = node.get<std::string>("name");
    spec.type = node.get<std::string>("type");
    if (!names.insert(spec.name).second) {
      node.at("name").fail("duplicate layer name '" + spec.name + "'");
    }
    if (node.has("bottom")) spec.bottoms = node.get_list<std::string>("bottom");
    if (node.has("top")) spec.tops = node.get_list<std::string>("top");
    node.allow("loss_weight");  // read in build(), where the layer kind is known
    spec.node = &node;
    spec.phase = phase_;
    spec.math = math;
    spec.sync_batch_norm = sync_batch_norm;
    spec.workspace_limit = model.has("workspace_limit") ? &model.at("workspace_limit") : nullptr;
    if (node.has("precision")) {
      spec.precision = node.get<std::string>("precision");
      if (!parse_precision(spec.precision)) {
        node.at("precision")
            .fail("layer '" + spec.name + "': unknown precision '" + spec.precision +
                  "'; choose from fp32, tf32, bf16, fp16");
      }
    }
    if (node.has("phase")) {
      const std::string p = node.get<std::string>("phase");
      if (p != "train" && p != "test") {
        node.at("phase").fail("layer '" + spec.name + "': phase must be train or test, got '" + p +
                              "'");
      }
      if (p != phase_name(phase_)) continue;
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

void Net::insert_splits(std::vector<LayerSpec>& specs) const {
  // Pass 1: who produces each blob version and who consumes it.
  std::map<std::string, Producer> current;
  for (size_t i = 0; i < inputs_.size(); ++i) current[inputs_[i].first] = {-1, int(i)};
  std::map<Producer, std::vector<std::pair<int, int>>> consumers;  // -> (layer, bottom index)
  std::map<Producer, std::string> produced_name;
  for (size_t i = 0; i < inputs_.size(); ++i) produced_name[{-1, int(i)}] = inputs_[i].first;
  for (size_t l = 0; l < specs.size(); ++l) {
    for (size_t b = 0; b < specs[l].bottoms.size(); ++b) {
      const std::string& name = specs[l].bottoms[b];
      auto it = current.find(name);
      if (it == current.end()) {
        std::vector<std::string> known;
        for (const auto& entry : current) known.push_back(entry.first);
        std::string message = "layer '" + specs[l].name + "': bottom '" + name +
                              "' is not produced by any earlier layer (known: " + join(known) + ")";
        if (specs[l].node != nullptr) specs[l].node->at("bottom").fail(message);
        throw Error(message);
      }
      consumers[it->second].emplace_back(int(l), int(b));
    }
    for (size_t t = 0; t < specs[l].tops.size(); ++t) {
      current[specs[l].tops[t]] = {int(l), int(t)};
      produced_name[{int(l), int(t)}] = specs[l].tops[t];
    }
  }
  // Pass 2: give every consumer of a shared version its own Split top. All renaming happens
  // before any insertion, since inserting shifts the layer indices the consumer lists hold.
  std::vector<std::pair<int, LayerSpec>> splits;  // (producer layer, split spec)
  for (const auto& [producer, users] : consumers) {
    if (users.size() < 2) continue;
    const std::string& name = produced_name[producer];
    const std::string prefix = producer.layer < 0 ? name : specs[producer.layer].name + "_" + name;
    LayerSpec split;
    split.name = prefix + "_split";
    split.type = "Split";
    split.bottoms = {name};
    for (size_t k = 0; k < users.size(); ++k) {
      const std::string top = prefix + "_split_" + std::to_string(k);
      split.tops.push_back(top);
      specs[users[k].first].bottoms[users[k].second] = top;
    }
    splits.emplace_back(producer.layer, std::move(split));
  }
  // Each Split goes right after its producer; walking backwards keeps earlier positions valid.
  for (auto it = splits.rbegin(); it != splits.rend(); ++it) {
    specs.insert(specs.begin() + (it->first + 1), std::move(it->second));
  }
}

void Net::fail_at_layer(size_t i, const std::string& message) const {
  const Layer& layer = *layers_[i];
  std::string text = message;
  const std::string who = "layer '" + layer.name() + "'";
  if (text.find(who) == std::string::npos) text = who + " (" + layer.type() + "): " + text;
  const ConfigNode* node = layer.spec().node;
  if (node != nullptr && text.rfind(node->location().file + ":", 0) != 0) node->fail(text);
  throw Error(text);
}

void Net::share_named_params() {
  std::map<std::string, Param*> owners;
  for (auto& layer : layers_) {
    const ConfigNode* node = layer->spec().node;
    for (Param& p : layer->params()) {
      const std::string role = p.name.substr(p.name.rfind('.') + 1);
      std::string share;
      if (node != nullptr && node->has("param") && node->at("param").has(role) &&
          node->at("param").at(role).has("name")) {
        share = node->at("param").at(role).get<std::string>("name");
      }
      if (share.empty()) {
        learnable_.push_back(&p);
        continue;
      }
      auto it = owners.find(share);
      if (it == owners.end()) {
        owners[share] = &p;
        learnable_.push_back(&p);
      } else if (it->second->value.shape() != p.value.shape()) {
        node->at("param").at(role).at("name").fail(
            "shared parameter '" + share + "': " + p.name + " is " + shape_str(p.value.shape()) +
            " but " + it->second->name + " is " + shape_str(it->second->value.shape()));
      } else {
        p.value = it->second->value;
        p.grad = it->second->grad;
      }
    }
  }
}

void Net::decide_backward() {
  const size_t n = layers_.size();
  blob_needs_grad_.assign(blobs_.size(), false);
  std::vector<bool> needs(n, false);
  for (size_t i = 0; i < n; ++i) {
    bool any = false;
    for (const Param& p : layers_[i]->params()) any = any || p.lr_mult != 0.0f;
    Wiring& w = wiring_[i];
    w.propagate_down.clear();
    for (Blob* b : w.bottoms) {
      const bool down = blob_needs_grad_[blob_index_of(b)];
      w.propagate_down.push_back(down);
      any = any || down;
    }
    needs[i] = any;
    if (any) {
      for (Blob* t : w.tops) blob_needs_grad_[blob_index_of(t)] = true;
    }
  }
  // Walking backwards: a layer contributes when one of its tops is weighted into the loss or
  // feeds a contributing layer.
  std::vector<bool> feeds_loss(blobs_.size(), false);
  std::vector<bool> contributes(n, false);
  for (size_t k = n; k-- > 0;) {
    const Wiring& w = wiring_[k];
    bool c = false;
    for (size_t t = 0; t < w.tops.size(); ++t) {
      c = c || w.loss_weights[t] != 0.0f || feeds_loss[blob_index_of(w.tops[t])];
    }
    contributes[k] = c;
    if (c) {
      for (Blob* b : w.bottoms) feeds_loss[blob_index_of(b)] = true;
    }
  }
  runs_backward_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    runs_backward_[i] = contributes[i] && needs[i];
    if (!runs_backward_[i])
      std::fill(wiring_[i].propagate_down.begin(), wiring_[i].propagate_down.end(), false);
  }
  // A top gradient read by a backward-running layer must be written by someone: a consumer that
  // propagates down into it, or the loss weight. Otherwise it is zeroed before each backward.
  std::vector<bool> written(blobs_.size(), false);
  for (size_t i = 0; i < n; ++i) {
    const Wiring& w = wiring_[i];
    for (size_t b = 0; b < w.bottoms.size(); ++b) {
      if (w.propagate_down[b]) written[blob_index_of(w.bottoms[b])] = true;
    }
    for (size_t t = 0; t < w.tops.size(); ++t) {
      if (w.loss_weights[t] != 0.0f) written[blob_index_of(w.tops[t])] = true;
    }
  }
  grads_to_zero_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (!runs_backward_[i]) continue;
    for (Blob* t : wiring_[i].tops) {
      const size_t index = blob_index_of(t);
      if (!written[index] &&
          std::find(grads_to_zero_.begin(), grads_to_zero_.end(), index) == grads_to_zero_.end()) {
        grads_to_zero_.push_back(index);
      }
    }
  }
  plan_memory();
}

size_t Net::blob_index_of(const Blob* blob) const {
  for (size_t i = 0; i < blobs_.size(); ++i) {
    if (blobs_[i].get() == blob) return i;
  }
  CREMA_CHECK(false, "blob '" + blob->name + "' does not belong to this net");
  return 0;
}

Blob& Net::blob(const std::string& name) {
  auto it = blob_index_.find(name);
  if (it == blob_index_.end()) {
    std::vector<std::string> known;
    for (const auto& entry : blob_index_) known.push_back(entry.first);
    throw Error("the net has no blob '" + name + "' (known: " + join(known) + ")");
  }
  return *blobs_[it->second];
}

void Net::set_batch_size(int64_t batch_size, Context& ctx) {
  if (batch_size == batch_size_) return;
  batch_size_ = batch_size;
  unplace_memory();
  for (const auto& [name, sample_shape] : inputs_) {
    Shape shape{batch_size_};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    blob(name).value.reshape(shape);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->reshape(wiring_[i].bottoms, wiring_[i].tops, ctx);
    for (Blob* top : wiring_[i].tops) top->grad.reshape(top->value.shape());
  }
  plan_memory();
}

void Net::forward_layer(size_t i, Context& ctx) {
  layers_[i]->forward(wiring_[i].bottoms, wiring_[i].tops, ctx);
}

void Net::backward_layer(size_t i, Context& ctx) {
  if (runs_backward_[i]) {
    layers_[i]->backward(wiring_[i].tops, wiring_[i].propagate_down, wiring_[i].bottoms, ctx);
  }
}

void Net::forward(Context& ctx) {
  for (size_t i = 0; i < layers_.size(); ++i) forward_layer(i, ctx);
}

double Net::loss() const {
  double loss = 0.0;
  for (const auto& [top, weight] : loss_tops_) loss += weight * top->value.to_vector()[0];
  return loss;
}

void Net::backward(Context& ctx, const std::function<void(size_t layer)>& after_layer) {
  begin_backward(ctx);
  for (size_t i = layers_.size(); i-- > 0;) {
    backward_layer(i, ctx);
    if (after_layer) after_layer(i);
  }
}

void Net::begin_backward(Context& ctx) {
  if (phase_ == Phase::test && memory_plan_) {
    throw Error(
        "backward on a test-phase net: its memory plan keeps no gradients "
        "(model.memory_plan: false keeps them)");
  }
  for (size_t index : grads_to_zero_) ctx.fill(blobs_[index]->grad, 0.0f);
  for (const Wiring& w : wiring_) {
    for (size_t t = 0; t < w.tops.size(); ++t) {
      if (w.loss_weights[t] != 0.0f) {
        ctx.fill(w.tops[t]->grad, w.loss_weights[t] * loss_scale_);
      }
    }
  }
}

// A training step needs no call: the solver's fused update reads each parameter gradient and
// zeroes it in the same pass (kernels/optimizers/optimizers.h). The training loop calls this when
// it drops a step's gradients without an update: a skipped non-finite step and a rollback to the
// last checkpoint (apps/training/loop.cpp).
void Net::zero_param_grads(Context& ctx) {
  for (Param* p : learnable_) ctx.fill(p->grad, 0.0f);
}

std::vector<std::string> Net::output_names() const {
  std::set<const Blob*> consumed;
  for (const Wiring& w : wiring_) {
    for (const Blob* b : w.bottoms) {
      if (std::find(w.tops.begin(), w.tops.end(), b) == w.tops.end()) consumed.insert(b);
    }
  }
  std::vector<std::string> names;
  for (const auto& blob : blobs_) {
    if (consumed.count(blob.get()) == 0 && blob->value.numel() == 1 &&
        blob_index_.count(blob->name) != 0 && blobs_[blob_index_.at(blob->name)] == blob) {
      bool is_input = false;
      for (const auto& input : inputs_) is_input = is_input || input.first == blob->name;
      if (!is_input) names.push_back(blob->name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::pair<std::string, double>> Net::outputs() const {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& name : output_names()) {
    out.emplace_back(name, blobs_[blob_index_.at(name)]->value.to_vector()[0]);
  }
  return out;
}

std::string Net::summary() const {
  std::ostringstream out;
  int64_t total_params = 0, total_macs = 0;
  char line[512];
  const char* row = "%-20s %-16s %-24s %12s %16s\n";
  if (precision_.precision != Precision::fp32 || precision_.layout != Layout::nchw) {
    out << "precision " << precision_name(precision_.precision) << ", layout "
        << layout_name(precision_.layout) << " (core/net_precision.h)\n";
  }
  std::snprintf(line, sizeof line, row, "layer", "type", "top shapes", "params", "multiply-adds");
  out << line;
  for (const auto& [name, shape] : inputs_) {
    Shape full{batch_size_};
    full.insert(full.end(), shape.begin(), shape.end());
    std::snprintf(line, sizeof line, row, name.c_str(), "(input)", shape_str(full).c_str(), "0",
                  "0");
    out << line;
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    int64_t count = 0;
    for (const Param& p : layers_[i]->params()) count += p.value.numel();
    const int64_t macs = layers_[i]->multiply_adds(wiring_[i].bottoms, wiring_[i].tops);
    total_params += count;
    total_macs += macs;
    std::string tops;
    for (const Blob* t : wiring_[i].tops) {
      tops += (tops.empty() ? "" : " ") + shape_str(t->value.shape());
      // Stored otherwise than f32 (NCHW): say how (model.precision, model.layout).
      const BlobFormat format{t->value.dtype(),
                              t->value.ndim() == 4 ? t->value.layout() : Layout::nchw};
      if (format != BlobFormat{}) tops += " " + format_name(format);
    }
    std::snprintf(line, sizeof line, row, layers_[i]->name().c_str(), layers_[i]->type().c_str(),
                  tops.c_str(), std::to_string(count).c_str(), std::to_string(macs).c_str());
    out << line;
  }
  // A parameter shared by several layers is listed under each but stored once.
  int64_t unique = 0;
  for (const Param* p : learnable_) unique += p->value.numel();
  std::snprintf(line, sizeof line, row, "total", "", "", std::to_string(total_params).c_str(),
                std::to_string(total_macs).c_str());
  out << line;
  if (unique != total_params)
    out << "parameters stored once (shared ones counted once): " << unique << "\n";
  return out.str();
}

}  // namespace crema
