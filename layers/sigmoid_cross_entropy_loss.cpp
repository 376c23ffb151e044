// SigmoidCrossEntropyLoss: binary cross-entropy of sigmoid(x) against targets t (Caffe's layer;
// PyTorch's BCEWithLogitsLoss).
//
//   loss = (1 / normalizer) * sum over counted k of  max(x_k, 0) - x_k t_k + log(1 + exp(-|x_k|))
//   which is -t log(sigmoid(x)) - (1 - t) log(1 - sigmoid(x)) without overflow or log(0).
//   bottoms: logits x (any shape, N = its first extent), targets t with as many elements
//   (probabilities, usually 0 or 1); top: loss, a scalar.
//   An element is counted unless ignore_label is given and t_k equals it.
//   normalizer: batch_size (N; Caffe's default for this layer), valid (counted elements, at least
//   1), full (all elements) or none (1). PyTorch's BCEWithLogitsLoss(reduction='mean') is
//   `normalization: full`; reduction='sum' is `none`.
// The loss and its normalizer are computed on the context's device, and the backward reads the
// loss weight from the top's gradient there too.
// YAML keys (defaults): normalization (batch_size), ignore_label (none), loss_weight (1).
#include "kernels/loss/loss.h"
#include "layers/loss_layer.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class SigmoidCrossEntropyLossLayer final : public ElementwiseLossLayer {
 public:
  explicit SigmoidCrossEntropyLossLayer(const LayerSpec& spec)
      : ElementwiseLossLayer(spec, "logits", "targets") {
    const ConfigNode& node = *spec.node;
    if (node.has("ignore_label")) {
      options_.has_ignore_label = true;
      options_.ignore_label = node.get<int>("ignore_label");
    }
    options_.normalization = loss_normalization(spec, "batch_size");
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::sigmoid_cross_entropy_forward(ctx, bottom[0]->value, bottom[1]->value, top[0]->value,
                                           options_);
  }

  // With s = sigmoid(x), ds/dx = s (1 - s), so d/dx [-t log s - (1 - t) log(1 - s)]
  //   = -t (1 - s) + (1 - t) s = s - t;
  // dL/dx = (top gradient / normalizer) * (sigmoid(x) - t), zero at ignored elements. The top
  // gradient is the loss weight the Net put there; the kernel reads it on the device.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (propagate_down[1]) fail("cannot backpropagate into the targets '" + bottom[1]->name + "'");
    if (!propagate_down[0]) return;
    kernels::sigmoid_cross_entropy_backward(ctx, bottom[0]->value, bottom[1]->value, top[0]->grad,
                                            options_, bottom[0]->grad);
  }

 private:
  kernels::SigmoidCrossEntropyOptions options_;
};

}  // namespace

void register_sigmoid_cross_entropy_loss(LayerRegistry& registry) {
  registry.add<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss");
}

}  // namespace crema
