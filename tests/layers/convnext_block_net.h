// A small ConvNeXt stage for the net-level tests of the bf16 channels-last path
// (convnext_block_net_test.cpp on the CPU, convnext_block_net_cuda_test.cpp on a GPU): a stem
// (1x1 convolution, LayerNorm over the channels as torchvision's LayerNorm2d), one block as
// torchvision's CNBlock (depthwise 7x7, Permute to [N, H, W, C], LayerNorm over the last axis,
// Linear x4, GELU, Linear, Permute back, LayerScale, StochasticDepth, the residual sum), global
// average pooling and a classifier. `depth_p` is the StochasticDepth probability.
#pragma once

#include <string>

namespace crema::testing {

inline std::string convnext_block_net(const std::string& depth_p) {
  return R"(
inputs: {data: [3, 9, 7], label: []}
layers:
  - {name: stem, type: Convolution, bottom: data, top: stem, num_output: 16, kernel_size: 1}
  - {name: stem_norm, type: LayerNorm, bottom: stem, top: stem_norm, axis: 1, eps: 1e-6}
  - {name: dw, type: Convolution, bottom: stem_norm, top: dw, num_output: 16, kernel_size: 7,
     pad: 3, group: 16}
  - {name: to_last, type: Permute, bottom: dw, top: to_last, order: [0, 2, 3, 1]}
  - {name: norm, type: LayerNorm, bottom: to_last, top: norm, axis: -1, eps: 1e-6}
  - {name: fc1, type: InnerProduct, bottom: norm, top: fc1, num_output: 64, axis: 3}
  - {name: gelu, type: GELU, bottom: fc1, top: fc1}
  - {name: fc2, type: InnerProduct, bottom: fc1, top: fc2, num_output: 16, axis: 3}
  - {name: to_first, type: Permute, bottom: fc2, top: to_first, order: [0, 3, 1, 2]}
  - {name: scale, type: LayerScale, bottom: to_first, top: scaled,
     filler: {type: constant, value: 0.5}}
  - {name: depth, type: StochasticDepth, bottom: scaled, top: scaled, p: )" +
         depth_p + R"(}
  - {name: add, type: Eltwise, bottom: [scaled, stem_norm], top: out, operation: SUM}
  - {name: pool, type: Pooling, bottom: out, top: pool, pool: average, global_pooling: true}
  - {name: fc, type: InnerProduct, bottom: pool, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";
}

}  // namespace crema::testing
