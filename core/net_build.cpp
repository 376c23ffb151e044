// Net's construction (net.h): the blobs, each layer wired, set up and reshaped in order, and the
// precision pass's Convert layers (core/net_precision.h) inserted where a bottom is stored
// otherwise than its layer runs.
#include <algorithm>

#include "core/error.h"
#include "core/net.h"
#include "core/net_precision.h"
#include "core/shape.h"

namespace crema {

Blob* Net::new_blob(const std::string& name, const BlobFormat& format, bool planned, Context& ctx) {
  // A planned blob's tensors take their storage from its places: none until plan_memory.
  auto blob = std::make_unique<Blob>();
  blob->name = name;
  value_places_.push_back(std::make_unique<PlacedAllocator>());
  grad_places_.push_back(std::make_unique<PlacedAllocator>());
  value_kept_.push_back(false);
  planned = planned && memory_plan_;
  for (auto [tensor, place] : {std::pair{&blob->value, value_places_.back().get()},
                               std::pair{&blob->grad, grad_places_.back().get()}}) {
    *tensor = planned ? Tensor({0}, format.dtype, device_, place) : ctx.empty({0}, format.dtype);
    tensor->set_layout(format.layout);
  }
  blob_index_[name] = blobs_.size();
  blobs_.push_back(std::move(blob));
  return blobs_.back().get();
}

void Net::build(std::vector<LayerSpec> specs, const LayerRegistry& registry, Context& ctx) {
  for (const auto& [name, sample_shape] : inputs_) {
    Shape shape{batch_size_};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    Blob* blob = new_blob(name, BlobFormat{}, false, ctx);
    blob->value.reshape(shape);
  }
  for (LayerSpec& spec : specs) {
    std::unique_ptr<Layer> layer = registry.create(spec);
    BlobFormat format;
    try {
      format = layer_format(*layer, precision_, runs_on_);
    } catch (const Error& e) {
      if (spec.node != nullptr && spec.node->has("precision"))
        spec.node->at("precision").fail(e.what());
      throw;
    }
    // Bottoms stored otherwise reach the layer through a Convert; an in-place layer then works
    // on the converted blob, which from here on bears the name.
    std::vector<std::pair<std::string, std::string>> renamed;  // (name, converted) in place
    for (std::string& bottom : spec.bottoms) {
      if (stored_as(blobs_[blob_index_.at(bottom)]->value, format)) continue;
      const std::string converted = add_convert(bottom, format, registry, ctx);
      for (std::string& top : spec.tops) {
        if (top == bottom) {
          top = converted;
          renamed.emplace_back(bottom, converted);
        }
      }
      bottom = converted;
    }
    add_layer(std::move(spec), std::move(layer), format, ctx);
    for (const auto& [name, converted] : renamed) blob_index_[name] = blob_index_.at(converted);
  }
  share_named_params();
  for (auto& layer : layers_) {
    for (Buffer& b : layer->buffers()) buffers_.push_back(&b);
  }
  decide_backward();
}

void Net::add_layer(LayerSpec spec, std::unique_ptr<Layer> made, const BlobFormat& format,
                    Context& ctx) {
  const size_t i = layers_.size();
  layers_.push_back(std::move(made));
  Layer& layer = *layers_.back();
  wiring_.emplace_back();
  Wiring& w = wiring_.back();
  auto count_error = [&](const char* what, size_t got, int lo, int hi) {
    std::string want =
        lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
    fail_at_layer(i, "takes " + want + " " + what + ", got " + std::to_string(got));
  };
  if (int(spec.bottoms.size()) < layer.min_bottoms() ||
      int(spec.bottoms.size()) > layer.max_bottoms()) {
    count_error("bottom(s)", spec.bottoms.size(), layer.min_bottoms(), layer.max_bottoms());
  }
  if (int(spec.tops.size()) < layer.min_tops() || int(spec.tops.size()) > layer.max_tops()) {
    count_error("top(s)", spec.tops.size(), layer.min_tops(), layer.max_tops());
  }
  for (const std::string& name : spec.bottoms)
    w.bottoms.push_back(blobs_[blob_index_.at(name)].get());
  for (const std::string& name : spec.tops) {
    const bool in_place =
        std::find(spec.bottoms.begin(), spec.bottoms.end(), name) != spec.bottoms.end();
    if (in_place) {
      w.tops.push_back(blobs_[blob_index_.at(name)].get());
    } else if (blob_index_.count(name) != 0) {
      fail_at_layer(
          i, "top '" + name + "' is already produced by an earlier layer; give it another name");
    } else {
      w.tops.push_back(new_blob(name, format, true, ctx));
    }
  }
  const float default_weight = layer.is_loss() ? 1.0f : 0.0f;
  const float weight =
      spec.node ? spec.node->get<float>("loss_weight", default_weight) : default_weight;
  w.loss_weights.assign(spec.tops.size(), 0.0f);
  if (!w.loss_weights.empty()) w.loss_weights[0] = weight;
  scratch_places_.push_back(std::make_unique<PlacedAllocator>());
  if (memory_plan_) layer.set_scratch_allocator(scratch_places_.back().get());
  const size_t held_before = allocator_->current_bytes();
  try {
    layer.setup(w.bottoms, w.tops, ctx);
    layer.reshape(w.bottoms, w.tops, ctx);
  } catch (const Error& e) {
    fail_at_layer(i, e.what());
  }
  if (memory_plan_) {  // planned tops took nothing: the rest is parameters, buffers and state
    int64_t state = int64_t(allocator_->current_bytes()) - int64_t(held_before);
    for (const Param& p : layer.params()) state -= int64_t(p.value.nbytes() + p.grad.nbytes());
    for (const Buffer& b : layer.buffers()) state -= int64_t(b.value.nbytes());
    layer_state_ += std::max<int64_t>(state, 0);
  }
  if (weight != 0.0f && w.tops[0]->value.numel() != 1) {
    fail_at_layer(i, "loss_weight needs a scalar top, but '" + w.tops[0]->name + "' is " +
                         shape_str(w.tops[0]->value.shape()));
  }
  for (Blob* top : w.tops) top->grad.reshape(top->value.shape());
  if (weight != 0.0f) loss_tops_.emplace_back(w.tops[0], weight);
  if (spec.node != nullptr) {
    if (spec.node->has("param")) {
      spec.node->at("param").check_no_unknown_keys("param of layer '" + spec.name + "'");
    }
    spec.node->check_no_unknown_keys("layer '" + spec.name + "'");
  }
}

std::string Net::add_convert(const std::string& blob, const BlobFormat& format,
                             const LayerRegistry& registry, Context& ctx) {
  std::string name = blob + "@" + format_name(format);
  std::replace(name.begin(), name.end(), ' ', '_');
  for (int k = 2; blob_index_.count(name) != 0; ++k) name = blob + "@" + std::to_string(k);
  LayerSpec spec;
  spec.name = name;
  spec.type = "Convert";
  spec.bottoms = {blob};
  spec.tops = {name};
  spec.phase = phase_;
  std::unique_ptr<Layer> layer = registry.create(spec);
  add_layer(std::move(spec), std::move(layer), format, ctx);
  return name;
}

}  // namespace crema
