// The list of layer types. Each layer file defines its class privately and one registration
// function; register_layers() calls them all. To add a layer: write layers/<name>.cpp (see
// README.md), declare its register_<name>() here and call it in register_layers.cpp.
#pragma once

#include "core/registry.h"

namespace crema {

// Every built-in layer type.
LayerRegistry builtin_layers();
void register_layers(LayerRegistry& registry);

void register_accuracy(LayerRegistry& registry);
void register_activations(LayerRegistry& registry);  // ELU, Sigmoid, TanH, Clip, Swish/SiLU, GELU,
                                                     // Hardsigmoid, Hardswish, Mish, Softsign
void register_batch_norm(LayerRegistry& registry);
void register_batch_norm_relu(LayerRegistry& registry);
void register_channel_shuffle(LayerRegistry& registry);
void register_concat(LayerRegistry& registry);
void register_convolution(LayerRegistry& registry);
void register_deconvolution(LayerRegistry& registry);
void register_dropout(LayerRegistry& registry);
void register_eltwise(LayerRegistry& registry);
void register_euclidean_loss(LayerRegistry& registry);
void register_inner_product(LayerRegistry& registry);
void register_layer_norm(LayerRegistry& registry);
void register_layer_scale(LayerRegistry& registry);
void register_lrn(LayerRegistry& registry);
void register_permute(LayerRegistry& registry);
void register_pooling(LayerRegistry& registry);
void register_prelu(LayerRegistry& registry);
void register_recurrent(LayerRegistry& registry);  // RNN, LSTM, GRU
void register_relu(LayerRegistry& registry);
void register_reshape(LayerRegistry& registry);  // Flatten, Reshape
void register_scale(LayerRegistry& registry);    // Scale, Bias
void register_sigmoid_cross_entropy_loss(LayerRegistry& registry);
void register_slice(LayerRegistry& registry);
void register_softmax(LayerRegistry& registry);  // Softmax, LogSoftmax
void register_softmax_with_loss(LayerRegistry& registry);
void register_split(LayerRegistry& registry);
void register_convert(LayerRegistry& registry);
void register_stochastic_depth(LayerRegistry& registry);

}  // namespace crema
