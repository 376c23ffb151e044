#include "core/layer.h"

#include "core/error.h"

namespace crema {

const char* phase_name(Phase phase) {
  return phase == Phase::train ? "train" : "test";
}

bool LayerSpec::batch_norm_syncs() const {
  if (node == nullptr) return false;
  if (node->has("sync")) return node->get<bool>("sync");
  return sync_batch_norm && node->get<std::string>("mode", "spatial") == "spatial";
}

size_t Layer::add_param(const std::string& role, const Shape& shape, Context& ctx,
                        float default_lr_mult, float default_decay_mult) {
  Param p;
  p.name = name() + "." + role;
  p.value = ctx.empty(shape);
  p.grad = ctx.zeros(shape);
  p.lr_mult = default_lr_mult;
  p.decay_mult = default_decay_mult;
  if (spec_.node != nullptr && spec_.node->has("param")) {
    const ConfigNode& all = spec_.node->at("param");
    if (all.has(role)) {
      const ConfigNode& mine = all.at(role);
      p.lr_mult = mine.get<float>("lr_mult", p.lr_mult);
      p.decay_mult = mine.get<float>("decay_mult", p.decay_mult);
      mine.allow("name");  // the sharing name is the Net's business
      mine.check_no_unknown_keys("param '" + role + "' of layer '" + name() + "'");
    }
  }
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

size_t Layer::add_buffer(const std::string& role, const Shape& shape, Context& ctx, float value) {
  Buffer b;
  b.name = name() + "." + role;
  b.value = ctx.empty(shape);
  ctx.fill(b.value, value);
  buffers_.push_back(std::move(b));
  return buffers_.size() - 1;
}

Tensor Layer::make_scratch(const Shape& shape, DType dtype, Context& ctx) const {
  if (scratch_allocator_ == nullptr) return ctx.empty(shape, dtype);
  return Tensor(shape, dtype, ctx.device(), scratch_allocator_);
}

void Layer::set_top_window(size_t k, const BlobWindow* window) {
  if (top_windows_.size() <= k) top_windows_.resize(k + 1);
  top_windows_[k] = window ? *window : BlobWindow();
}

const BlobWindow* Layer::top_window(size_t k) const {
  return k < top_windows_.size() && top_windows_[k].parent ? &top_windows_[k] : nullptr;
}

void Layer::set_bottom_is_window(size_t k, bool window) {
  if (bottom_windows_.size() <= k) bottom_windows_.resize(k + 1, false);
  bottom_windows_[k] = window;
}

void Layer::export_graph(const LayerIO&, GraphBuilder&) const {
  fail("a " + type() + " layer has no ONNX form yet, so this net cannot be exported");
}

void Layer::fail(const std::string& message) const {
  throw Error("layer '" + name() + "' (" + type() + "): " + message);
}

}  // namespace crema
