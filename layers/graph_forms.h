// What several layers' ONNX forms share (Layer::export_graph, core/graph_export.h): the
// activations as ONNX operators or small compositions of them, and list conversions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/graph_export.h"
#include "kernels/activations/pointwise.h"

namespace crema {

// y = f(x) for the pointwise activation `a`: Elu, Sigmoid, Tanh, Clip, HardSigmoid (alpha 1/6,
// beta 1/2) and HardSwish are ONNX operators; Swish
// is x * Sigmoid(beta x); GELU (opset 17 has no Gelu) is 0.5 x (1 + Erf(x / sqrt 2)), or its
// tanh approximation 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void export_activation(const kernels::Activation& a, const LayerIO& io, GraphBuilder& g);

template <class T>
std::vector<int64_t> as_int64(const std::vector<T>& values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

}  // namespace crema
