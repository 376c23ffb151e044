// The last step of every CUDA loss (softmax cross-entropy, sigmoid cross-entropy, Euclidean):
// the finishing block of the fixed-order reduction (kernels/common/reduce_cuda.cuh) turns
// the summed terms and the counted positions into the device-resident loss,
//   loss = factor * sum / normalizer,
// with the normalizer chosen as loss_normalizer (loss.h) chooses it on the host.
#pragma once

#include "kernels/common/reduce_cuda.cuh"
#include "kernels/loss/loss.h"

namespace crema::kernels::cuda::detail {

struct StoreLoss {
  float* loss;
  LossNormalization normalization;
  int64_t outer, inner;
  double factor = 1.0;  // 1/2 for the Euclidean loss
  __device__ void operator()(Partial p) const {
    int64_t normalizer = 1;
    switch (normalization) {
      case LossNormalization::valid:
        normalizer = p.count > 1 ? p.count : 1;
        break;
      case LossNormalization::batch_size:
        normalizer = outer;
        break;
      case LossNormalization::full:
        normalizer = outer * inner;
        break;
      case LossNormalization::none:
        break;
    }
    *loss = float(factor * p.value / double(normalizer));
  }
};

}  // namespace crema::kernels::cuda::detail
