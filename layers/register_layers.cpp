#include "layers/register_layers.h"

namespace crema {

void register_layers(LayerRegistry& registry) {
  register_accuracy(registry);
  register_activations(registry);
  register_batch_norm(registry);
  register_batch_norm_relu(registry);
  register_channel_shuffle(registry);
  register_concat(registry);
  register_convolution(registry);
  register_deconvolution(registry);
  register_dropout(registry);
  register_eltwise(registry);
  register_euclidean_loss(registry);
  register_inner_product(registry);
  register_layer_norm(registry);
  register_layer_scale(registry);
  register_lrn(registry);
  register_permute(registry);
  register_pooling(registry);
  register_prelu(registry);
  register_recurrent(registry);
  register_relu(registry);
  register_reshape(registry);
  register_scale(registry);
  register_sigmoid_cross_entropy_loss(registry);
  register_slice(registry);
  register_softmax(registry);
  register_softmax_with_loss(registry);
  register_split(registry);
  register_convert(registry);
  register_stochastic_depth(registry);
}

LayerRegistry builtin_layers() {
  LayerRegistry registry;
  register_layers(registry);
  return registry;
}

}  // namespace crema
