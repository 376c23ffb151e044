// The LayerNorm layer on the GPU against the CPU (check_cuda_parity): tops, bottom gradients and
// parameter gradients, over the last axis and the channels of NCHW, on awkward shapes (N = 1, odd
// H and W, C not a multiple of 8) and ConvNeXt-tiny's first stage; in channels-last (nhwc) blobs
// too, with LayerScale (the channels then rows of C in memory: the vectorized rows on the GPU).
#include <gtest/gtest.h>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

TEST(LayerNormLayerCuda, MatchesCpuLastAxis) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: ln, type: LayerNorm, eps: 1e-6}", {{1, 7, 5, 13}});
  check_cuda_parity("{name: ln, type: LayerNorm}", {{3, 45}});
  check_cuda_parity("{name: ln, type: LayerNorm, eps: 1e-6}", {{2, 14, 14, 96}});
  check_cuda_parity("{name: ln, type: LayerNorm, elementwise_affine: false}", {{5, 33}});
}

TEST(LayerNormLayerCuda, MatchesCpuChannels) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 1, eps: 1e-6}", {{1, 13, 7, 9}});
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 1}", {{3, 5, 17, 19}});
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 1, eps: 1e-6}", {{2, 96, 56, 56}});
}

TEST(LayerNormLayerCuda, MatchesCpuChannelsLast) {
  CREMA_REQUIRE_CUDA();
  ParityOptions nhwc;
  nhwc.layout = Layout::nhwc;
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 1, eps: 1e-6}", {{2, 96, 7, 9}}, nhwc);
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 1}", {{1, 13, 5, 7}}, nhwc);
  check_cuda_parity("{name: ln, type: LayerNorm, axis: 3}", {{2, 3, 5, 7}}, nhwc);
  check_cuda_parity("{name: ls, type: LayerScale, filler: {type: constant, value: 0.7}}",
                    {{2, 96, 7, 9}}, nhwc);
}

}  // namespace
}  // namespace crema::testing
