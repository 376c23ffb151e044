// `sync: true` on a BatchNorm layer (PyTorch's nn.SyncBatchNorm): the statistics of training
// are over every rank's samples. The BatchNorm registration asks this first
// (layers/batch_norm.cpp); sync_batch_norm.cpp says what the layer computes.
#pragma once

#include <memory>

#include "core/layer.h"

namespace crema {

// The SyncBatchNorm layer for a BatchNorm spec with `sync: true`; null for `sync: false` or none.
std::unique_ptr<Layer> make_sync_batch_norm_if_asked(const LayerSpec& spec);

}  // namespace crema
