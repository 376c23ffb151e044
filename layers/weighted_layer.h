// WeightedLayer: the base of layers with a weight and an optional bias (Convolution,
// InnerProduct), which read the same keys and create their parameters the same way.
//
// YAML keys (defaults): bias_term (true), weight_filler ({type: xavier}),
//   bias_filler ({type: constant, value: 0}), param: {weight: {...}, bias: {...}}.
#pragma once

#include "core/layer.h"
#include "layers/filler.h"

namespace crema {

class WeightedLayer : public Layer {
 protected:
  explicit WeightedLayer(const LayerSpec& spec);

  // Creates params_[0] "<name>.weight" of `weight_shape` and, with bias_term, params_[1]
  // "<name>.bias" of `num_outputs`, filled by their fillers.
  void create_weight_and_bias(const Shape& weight_shape, int64_t num_outputs, Context& ctx);

  Param& weight() { return params_[0]; }
  Param& bias() { return params_[1]; }  // only with bias_term

  bool bias_term_ = true;
  FillerSpec weight_filler_, bias_filler_;
};

}  // namespace crema
