// The Net's fusion pass: rewrites the layer list (before Splits are inserted and any layer is
// made) so that a BatchNorm and the ReLU after it, or a BatchNorm, the residual Eltwise SUM and
// the ReLU after that, run as one BatchNormReLU layer (layers/batch_norm_relu.cpp), one pass each
// way instead of two or three (kernels/batch_norm/README.md counts the bytes).
//
// The two patterns, blob names as written:
//   BatchNorm x -> t,  ReLU t -> t (in place)                        => BatchNormReLU [x] -> t
//   BatchNorm x -> t,  Eltwise SUM [t, r] -> s (coefficients 1, r     => BatchNormReLU [x, r] -> s
//     either side),  ReLU s -> s (in place)
// where each intermediate version (t; s before the ReLU) is read by that next layer only: a blob
// another layer also reads keeps the layers apart, and so do a ReLU that is not in place (its
// input stays observable), a leaky ReLU, a product or maximum, other coefficients or bottom
// counts, a loss_weight, and BatchNorm's per_activation mode. The outputs keep their names and
// values, bit for bit.
//
// The fused layer's spec is the BatchNorm's (its keys, so its parameters and buffers keep the
// BatchNorm's names: checkpoints, .pth files, ONNX export and shared parameters see no change),
// named after the layers it replaces: "layer1.0.bn3+add+relu3" (the later names without the
// first's dotted prefix). The residual form sits where the Eltwise was (both its inputs exist
// there). The absorbed ReLU and Eltwise keys are still checked for unknown keys. A BatchNorm +
// ReLU in place on x (as the zoo configs write them) would have to copy x for its backward; when
// x comes out of place from one layer that only the BatchNorm reads, that layer writes it as
// "<x>/bn_input" instead and the fused layer reads it from there (x still names the ReLU's output).
// A BatchNorm that stays alone, in place on such an x (ResNet's downsampling shortcut: the block's
// other BatchNorm absorbed the sum), reads its input apart the same way.
//
// `model.fuse: false` turns the pass off (default true).
#pragma once

#include <vector>

#include "core/config.h"
#include "core/layer.h"

namespace crema {

void fuse_layers(const ConfigNode& model, std::vector<LayerSpec>& specs);

}  // namespace crema
