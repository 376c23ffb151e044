// Accuracy: the fraction of positions whose label is among the top_k scores.
//
//   bottoms: scores [.., C, ..] (C at `axis`), labels with one entry per position; top: a scalar.
//   A position counts as correct when fewer than top_k other classes score at least as high as
//   its label (Caffe's rule: a tie counts against the label). Positions labelled ignore_label are
//   skipped.
// YAML keys (defaults): top_k (1), axis (1), ignore_label (none). Usually `phase: test`.
#include "kernels/accuracy/accuracy.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class AccuracyLayer final : public Layer {
 public:
  explicit AccuracyLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    top_k_ = node.get<int>("top_k", 1);
    if (top_k_ < 1) node.at("top_k").fail("top_k must be at least 1");
    axis_ = node.get<int>("axis", 1);
    if (node.has("ignore_label")) {
      has_ignore_ = true;
      ignore_label_ = node.get<int>("ignore_label");
    }
  }

  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Tensor& x = bottom[0]->value;
    const int axis = axis_ < 0 ? axis_ + x.ndim() : axis_;
    if (axis < 0 || axis >= x.ndim()) fail("axis out of range for " + shape_str(x.shape()));
    if (top_k_ > x.dim(axis)) {
      fail("top_k " + std::to_string(top_k_) + " exceeds the " + std::to_string(x.dim(axis)) + " classes");
    }
    if (bottom[1]->value.numel() != x.numel() / x.dim(axis)) {
      fail("labels " + shape_str(bottom[1]->value.shape()) + " do not match the scores " +
           shape_str(x.shape()) + " (one label per position)");
    }
    top[0]->value.reshape({});
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context& ctx) override {
    const kernels::AccuracyCount count = kernels::accuracy(
        ctx, bottom[0]->value, bottom[1]->value, top_k_, axis_, has_ignore_, ignore_label_);
    top[0]->value.fill(count.counted > 0 ? float(double(count.correct) / double(count.counted)) : 0.0f);
  }

  // Accuracy is not differentiable; the Net never runs this backward (it feeds no loss).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context&) override {
    for (bool down : propagate_down) {
      if (down) fail("accuracy has no gradient; do not put it on a path to a loss");
    }
  }

 private:
  int top_k_ = 1, axis_ = 1, ignore_label_ = -1;
  bool has_ignore_ = false;
};

}  // namespace

void register_accuracy(LayerRegistry& registry) { registry.add<AccuracyLayer>("Accuracy"); }

}  // namespace crema
