#include "layers/weighted_layer.h"

namespace crema {

WeightedLayer::WeightedLayer(const LayerSpec& spec) : Layer(spec) {
  const ConfigNode& node = *spec.node;
  bias_term_ = node.get<bool>("bias_term", true);
  FillerSpec xavier;
  xavier.type = "xavier";
  weight_filler_ = read_filler(node, "weight_filler", xavier);
  bias_filler_ = read_filler(node, "bias_filler", FillerSpec{});
}

void WeightedLayer::create_weight_and_bias(const Shape& weight_shape, int64_t num_outputs,
                                           Context& ctx) {
  add_param("weight", weight_shape, ctx);
  fill_tensor(weight_filler_, ctx.random(), params_[0].value);
  if (bias_term_) {
    add_param("bias", {num_outputs}, ctx);
    fill_tensor(bias_filler_, ctx.random(), params_[1].value);
  }
}

}  // namespace crema
