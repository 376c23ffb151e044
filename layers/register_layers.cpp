#include "layers/register_layers.h"

namespace crema {

void register_layers(LayerRegistry& registry) {
  register_accuracy(registry);
  register_convolution(registry);
  register_inner_product(registry);
  register_pooling(registry);
  register_relu(registry);
  register_softmax_with_loss(registry);
  register_split(registry);
}

LayerRegistry builtin_layers() {
  LayerRegistry registry;
  register_layers(registry);
  return registry;
}

}  // namespace crema
