// Accuracy: the fraction of positions whose label is among the top_k scores.
//
//   bottoms: scores [.., C, ..] (C at `axis`), labels with one entry per position; top: a scalar.
//   A position counts as correct when fewer than top_k other classes score at least as high as
//   its label (Caffe's rule: a tie counts against the label). Positions labelled ignore_label are
//   skipped.
//   Soft targets (a second bottom of the scores' shape, C > 1: mixup's, or the one-hot rows a
//   label input of [C] receives) count their largest class as the label (torch's argmax,
//   kernels/accuracy/accuracy.h target_labels); no ignore_label then.
//   The value is computed on the context's device (0 when every position is ignored); a label that
//   is not a class index (nor the ignore_label) is an error on the CPU and gives NaN on a GPU.
// YAML keys (defaults): top_k (1), axis (1), ignore_label (none). Usually `phase: test`.
#include "kernels/accuracy/accuracy.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class AccuracyLayer final : public Layer {
 public:
  explicit AccuracyLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    options_.top_k = node.get<int>("top_k", 1);
    if (options_.top_k < 1) node.at("top_k").fail("top_k must be at least 1");
    options_.axis = node.get<int>("axis", 1);
    if (node.has("ignore_label")) {
      options_.has_ignore_label = true;
      options_.ignore_label = node.get<int>("ignore_label");
    }
  }

  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    const int axis = options_.axis < 0 ? options_.axis + x.ndim() : options_.axis;
    if (axis < 0 || axis >= x.ndim()) fail("axis out of range for " + shape_str(x.shape()));
    if (options_.top_k > x.dim(axis)) {
      fail("top_k " + std::to_string(options_.top_k) + " exceeds the " +
           std::to_string(x.dim(axis)) + " classes");
    }
    soft_targets_ = bottom[1]->value.shape() == x.shape() && x.dim(axis) > 1;
    if (soft_targets_) {
      if (options_.has_ignore_label) {
        fail("targets '" + bottom[1]->name + "' " + shape_str(x.shape()) +
             " are soft (one probability per class), which have no ignore_label; remove it");
      }
      if (!labels_.defined()) labels_ = ctx.empty({0});
      labels_.reshape({x.numel() / x.dim(axis)});
    } else if (bottom[1]->value.numel() != x.numel() / x.dim(axis)) {
      fail("labels " + shape_str(bottom[1]->value.shape()) + " do not match the scores " +
           shape_str(x.shape()) + " (one label per position, or soft targets of their shape)");
    }
    top[0]->value.reshape({});
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (soft_targets_) {
      kernels::target_labels(ctx, bottom[1]->value, options_.axis, labels_);
      kernels::accuracy(ctx, bottom[0]->value, labels_, options_, top[0]->value);
    } else {
      kernels::accuracy(ctx, bottom[0]->value, bottom[1]->value, options_, top[0]->value);
    }
  }

  // Accuracy is not differentiable; the Net never runs this backward (it feeds no loss).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context&) override {
    for (bool down : propagate_down) {
      if (down) fail("accuracy has no gradient; do not put it on a path to a loss");
    }
  }

  bool in_inference_graph() const override { return false; }

 private:
  kernels::AccuracyOptions options_;
  bool soft_targets_ = false;  // the second bottom has the scores' shape (reshape decides)
  Tensor labels_;              // soft targets' labels, one per position
};

}  // namespace

void register_accuracy(LayerRegistry& registry) {
  registry.add<AccuracyLayer>("Accuracy");
}

}  // namespace crema
