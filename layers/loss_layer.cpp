#include "layers/loss_layer.h"

#include <utility>

#include "layers/key_error.h"

namespace crema {

kernels::LossNormalization loss_normalization(const LayerSpec& spec, const std::string& fallback) {
  const std::string name = spec.node->get<std::string>("normalization", fallback);
  kernels::LossNormalization normalization = kernels::LossNormalization::batch_size;
  if (!kernels::parse_loss_normalization(name, normalization)) {
    fail_at_key(spec, "normalization",
                "must be valid, batch_size, full or none, got '" + name + "'");
  }
  return normalization;
}

ElementwiseLossLayer::ElementwiseLossLayer(const LayerSpec& spec, std::string first,
                                           std::string second)
    : Layer(spec), first_(std::move(first)), second_(std::move(second)) {}

void ElementwiseLossLayer::reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                                   Context&) {
  const Tensor& a = bottom[0]->value;
  const Tensor& b = bottom[1]->value;
  if (a.numel() != b.numel()) {
    fail(first_ + " '" + bottom[0]->name + "' " + shape_str(a.shape()) + " and " + second_ + " '" +
         bottom[1]->name + "' " + shape_str(b.shape()) + " must have as many elements");
  }
  top[0]->value.reshape({});
}

}  // namespace crema
