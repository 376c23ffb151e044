// Slice: cuts its bottom along one axis into consecutive pieces, one per top (Caffe's Slice,
// torch.split).
//
//   x [.., K, ..]  ->  y_0 [.., K_0, ..], y_1 [.., K_1, ..], ...    K_0 + K_1 + ... = K
// The pieces end at the slice points p_0 < p_1 < ... (K_0 = p_0, K_1 = p_1 - p_0, ...,
// the last runs to K); without slice points, K is cut into as many equal pieces as there are tops.
// YAML keys (defaults): axis (1; negative counts from the end), slice_point ([]: equal pieces).
// Under the Net's memory plan a top may be a view of the bottom where its piece is contiguous
// (core/VIEWS.md): forward and backward then skip it, and do nothing when all tops are.
#include <algorithm>
#include <string>

#include "kernels/concat/concat.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class SliceLayer final : public Layer {
 public:
  explicit SliceLayer(const LayerSpec& spec) : Layer(spec) {
    axis_ = spec.node->get<int>("axis", 1);
    if (spec.node->has("slice_point")) points_ = spec.node->get_list<int64_t>("slice_point");
  }

  int max_tops() const override { return 1 << 20; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Shape& x = bottom[0]->value.shape();
    axis_index_ = canonical_axis(spec_, "axis", axis_, int(x.size()));
    const int64_t K = x[size_t(axis_index_)];
    extents_ = piece_extents(K, top.size());
    for (size_t t = 0; t < top.size(); ++t) {
      if (top[t] == bottom[0]) {
        fail("does not run in place (top '" + spec_.tops[t] + "' is the bottom)");
      }
      Shape shape = x;
      shape[size_t(axis_index_)] = extents_[t];
      top[t]->value.reshape(shape);
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    // A top that is a view of the bottom (core/VIEWS.md) is there already: it is skipped.
    std::vector<Tensor*> parts;
    for (size_t t = 0; t < top.size(); ++t) parts.push_back(is_view(t) ? nullptr : &top[t]->value);
    if (std::any_of(parts.begin(), parts.end(), [](Tensor* p) { return p != nullptr; })) {
      kernels::slice(ctx, bottom[0]->value, axis_index_, extents_, parts);
    }
  }

  // x is the y_t side by side, so dL/dx is the dL/dy_t side by side: a concat. A view's gradient
  // is the bottom's gradient at its place already (its consumer wrote it there, or the Net
  // zeroed it there).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    std::vector<const Tensor*> parts;
    for (size_t t = 0; t < top.size(); ++t) parts.push_back(is_view(t) ? nullptr : &top[t]->grad);
    if (std::any_of(parts.begin(), parts.end(), [](const Tensor* p) { return p != nullptr; })) {
      kernels::concat(ctx, parts, axis_index_, extents_, bottom[0]->grad);
    }
  }

  // Backward lays the tops' gradients side by side: no value is read.
  BackwardReads backward_reads() const override { return {false, false}; }

  // The Net may make contiguous tops views of the bottom along this axis (core/VIEWS.md).
  int splits_bottom_along() const override { return axis_index_; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    std::vector<std::string> outputs;
    for (const GraphValue& t : io.tops) outputs.push_back(t.name);
    g.node("Split", {io.bottom(0), g.ints(name() + "/split", extents_)}, outputs,
           {{"axis", axis_index_}});
  }

 private:
  // K_t for each top, from the slice points or an equal split of K.
  std::vector<int64_t> piece_extents(int64_t K, size_t tops) const {
    const std::string along =
        " along axis " + std::to_string(axis_index_) + " (extent " + std::to_string(K) + ")";
    std::vector<int64_t> extents;
    if (points_.empty()) {
      if (K % int64_t(tops) != 0) {
        fail_at_key(spec_, "slice_point",
                    "none given, and " + std::to_string(K) + " does not split into " +
                        std::to_string(tops) + " equal pieces" + along +
                        "; give slice_point or a divisible extent");
      }
      return std::vector<int64_t>(tops, K / int64_t(tops));
    }
    if (points_.size() + 1 != tops) {
      fail_at_key(spec_, "slice_point",
                  std::to_string(points_.size()) + " slice points make " +
                      std::to_string(points_.size() + 1) + " pieces, but the layer has " +
                      std::to_string(tops) + " tops");
    }
    int64_t previous = 0;
    for (int64_t p : points_) {
      if (p <= previous || p >= K) {
        fail_at_key(spec_, "slice_point",
                    "points must increase strictly within (0, " + std::to_string(K) + ")" + along +
                        "; " + std::to_string(p) + " does not");
      }
      extents.push_back(p - previous);
      previous = p;
    }
    extents.push_back(K - previous);
    return extents;
  }

  // Whether top t is a view of the bottom (the Net's plan said so).
  bool is_view(size_t t) const {
    const BlobWindow* window = top_window(t);
    return window != nullptr && window->view;
  }

  int axis_;
  std::vector<int64_t> points_;
  int axis_index_ = 0;
  std::vector<int64_t> extents_;  // K_t per top
};

}  // namespace

void register_slice(LayerRegistry& registry) {
  registry.add<SliceLayer>("Slice");
}

}  // namespace crema
