// EuclideanLoss: half the squared distance between two blobs (Caffe's layer; PyTorch's MSELoss up
// to a factor).
//
//   loss = 1 / (2 normalizer) * sum_k (a_k - b_k)^2
//   bottoms: a (any shape, N = its first extent), b with as many elements; top: loss, a scalar.
//   normalizer: batch_size (N: Caffe's sum / 2N, the default), full (all elements; valid is the
//   same, nothing is ignored) or none (1). PyTorch's MSELoss(reduction='mean') is
//   `normalization: full` with `loss_weight: 2`; reduction='sum' is `none` with `loss_weight: 2`.
// The loss is computed on the context's device, and the backward reads the loss weight from the
// top's gradient there too. Either bottom may receive a gradient (a regression target, or two
// learned embeddings pulled together).
// YAML keys (defaults): normalization (batch_size), loss_weight (1).
#include "kernels/loss/loss.h"
#include "layers/loss_layer.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class EuclideanLossLayer final : public ElementwiseLossLayer {
 public:
  explicit EuclideanLossLayer(const LayerSpec& spec)
      : ElementwiseLossLayer(spec, "bottom", "bottom"),
        normalization_(loss_normalization(spec, "batch_size")) {}

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::euclidean_loss_forward(ctx, bottom[0]->value, bottom[1]->value, top[0]->value,
                                    normalization_);
  }

  // d/da [(a - b)^2 / 2] = a - b and d/db = -(a - b), so with g the top gradient (the loss
  // weight the Net put there, read on the device):
  //   dL/da = g / normalizer * (a - b),   dL/db = -g / normalizer * (a - b)
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    kernels::euclidean_loss_backward(ctx, bottom[0]->value, bottom[1]->value, top[0]->grad,
                                     normalization_, propagate_down[0] ? &bottom[0]->grad : nullptr,
                                     propagate_down[1] ? &bottom[1]->grad : nullptr);
  }

 private:
  kernels::LossNormalization normalization_;
};

}  // namespace

void register_euclidean_loss(LayerRegistry& registry) {
  registry.add<EuclideanLossLayer>("EuclideanLoss");
}

}  // namespace crema
