// What the loss layers share: the `normalization` key, and for the element-wise losses
// (EuclideanLoss, SigmoidCrossEntropyLoss) two bottoms compared element by element into a scalar.
#pragma once

#include <string>
#include <vector>

#include "core/layer.h"
#include "kernels/loss/loss.h"

namespace crema {

// The `normalization` key (`fallback` when absent): valid, batch_size, full or none. Anything else
// is an error at the key that names the layer and the four choices.
kernels::LossNormalization loss_normalization(const LayerSpec& spec, const std::string& fallback);

// A loss of two bottoms of any shapes holding as many elements (as Caffe), such as predictions
// and targets, into a scalar top.
class ElementwiseLossLayer : public Layer {
 public:
  // `first` and `second` name the bottoms' roles in errors ("logits", "targets").
  ElementwiseLossLayer(const LayerSpec& spec, std::string first, std::string second);

  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  bool is_loss() const override { return true; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override;

 private:
  std::string first_, second_;
};

}  // namespace crema
