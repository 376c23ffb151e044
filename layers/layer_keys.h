// Small readers for keys that several layers share.
#pragma once

#include <string>
#include <utility>

#include "core/config.h"
#include "core/layer.h"
#include "kernels/gemm/gemm.h"

namespace crema {

// A size given once for both spatial axes or as [height, width]: `kernel_size: 5`,
// `kernel_size: [3, 5]`. Returns {h, w}; `fallback` when the key is absent.
std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key,
                                    std::pair<int64_t, int64_t> fallback);
// The same for a required key: its absence is an error naming the layer's location.
std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key);

// The `math:` key of a layer whose products have math modes (Convolution, Deconvolution,
// InnerProduct): fp32, tf32 or bf16 (kernels/gemm/gemm.h: GemmMath); the net's model.math
// (spec.math) when absent. Anything else is an error naming the layer and the key.
kernels::cuda::GemmMath read_math(const LayerSpec& spec);

}  // namespace crema
