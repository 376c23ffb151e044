// The Net's fusion pass on the GPU: fused and unfused nets give the same bits forward and
// backward, train and test (tests/core/net_fusion_test_util.h), at batch 1 and 2.
#include <gtest/gtest.h>

#include "tests/core/net_fusion_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::testing {
namespace {

TEST(NetFusionCuda, SameBitsAsUnfused) {
  CREMA_REQUIRE_CUDA();
  for (int64_t batch : {1, 2}) {
    Context ctx(Device::cuda(0));
    expect_fused_same_bits(ctx, batch);
  }
}

}  // namespace
}  // namespace crema::testing
