// Concat: joins its bottoms along one axis (Caffe's Concat, torch.cat).
//
//   x_0 [.., K_0, ..], x_1 [.., K_1, ..], ...  ->  y [.., K_0 + K_1 + ..., ..]
// The bottoms agree on every axis but `axis`: channels of two [N, C_i, H, W] maps give
// [N, C_0 + C_1, H, W] (GoogLeNet's inception outputs). Any number of bottoms, at least one.
// YAML keys (defaults): axis (1; negative counts from the end).
// Under the Net's memory plan a bottom may be a window of the top (core/VIEWS.md: its producer
// wrote it in place); forward and backward then skip it, and do nothing when all bottoms are.
#include <algorithm>
#include <string>

#include "kernels/concat/concat.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class ConcatLayer final : public Layer {
 public:
  explicit ConcatLayer(const LayerSpec& spec) : Layer(spec) {
    axis_ = spec.node->get<int>("axis", 1);
  }

  // Either layout (kernels::concat views an nhwc tensor in its memory order); bf16 and f16 on
  // CUDA too (layers/layer_runs.h).
  bool runs(DType dtype, Layout, const Device& device) const override {
    return kernels_run(dtype, device, true);
  }

  int max_bottoms() const override { return 1 << 20; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Shape& first = bottom[0]->value.shape();
    axis_index_ = canonical_axis(spec_, "axis", axis_, int(first.size()));
    Shape shape = first;
    shape[size_t(axis_index_)] = 0;
    for (size_t b = 0; b < bottom.size(); ++b) {
      if (top[0] == bottom[b]) {
        fail("does not run in place (top '" + spec_.tops[0] + "' is a bottom)");
      }
      const Shape& s = bottom[b]->value.shape();
      Shape a = s, f = first;
      if (a.size() == f.size()) a[size_t(axis_index_)] = f[size_t(axis_index_)] = 0;
      if (a != f) {
        fail_at_key(spec_, "bottom",
                    "'" + spec_.bottoms[0] + "' " + shape_str(first) + " and '" + spec_.bottoms[b] +
                        "' " + shape_str(s) +
                        " must agree on every axis but the concatenation axis " +
                        std::to_string(axis_index_));
      }
      shape[size_t(axis_index_)] += s[size_t(axis_index_)];
    }
    top[0]->value.reshape(shape);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    // A bottom that is a window of the top is there already (core/VIEWS.md): it is skipped.
    std::vector<const Tensor*> parts;
    std::vector<int64_t> extents;
    bool copies = false;
    for (size_t b = 0; b < bottom.size(); ++b) {
      parts.push_back(bottom_is_window(b) ? nullptr : &bottom[b]->value);
      extents.push_back(bottom[b]->value.dim(axis_index_));
      copies = copies || !bottom_is_window(b);
    }
    if (copies) kernels::concat(ctx, parts, axis_index_, extents, top[0]->value);
  }

  // y is the x_b side by side, so dL/dx_b is dL/dy's block at x_b's place: a slice.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    std::vector<int64_t> extents;
    std::vector<Tensor*> parts;
    for (size_t b = 0; b < bottom.size(); ++b) {
      extents.push_back(bottom[b]->value.dim(axis_index_));
      parts.push_back(propagate_down[b] && !bottom_is_window(b) ? &bottom[b]->grad : nullptr);
    }
    if (std::all_of(parts.begin(), parts.end(), [](Tensor* p) { return p == nullptr; })) return;
    kernels::slice(ctx, top[0]->grad, axis_index_, extents, parts);
  }

  // The Net may make bottoms windows of the top along this axis (core/VIEWS.md).
  int joins_bottoms_along() const override { return axis_index_; }

  // Backward slices dL/dy by the bottoms' shapes: no value is read.
  BackwardReads backward_reads() const override { return {false, false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    std::vector<std::string> inputs;
    for (const GraphValue& b : io.bottoms) inputs.push_back(b.name);
    g.node("Concat", inputs, {io.top(0)}, {{"axis", axis_index_}});
  }

 private:
  int axis_;            // as written
  int axis_index_ = 0;  // in [0, ndim)
};

}  // namespace

void register_concat(LayerRegistry& registry) {
  registry.add<ConcatLayer>("Concat");
}

}  // namespace crema
