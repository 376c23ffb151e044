// The PyTorch cases of nd_golden_test.cpp on the GPU: Convolution and Pooling on 1-D and 3-D
// inputs through the CUDA paths, within 1e-5 relative of PyTorch's float64 results.
#include <gtest/gtest.h>

#include "tests/fixtures/conv_fixture.h"
#include "tests/layers/nd_golden_cases.h"
#include "tests/support/cuda_test_util.h"

namespace crema::testing {
namespace {

TEST(NdGoldenCuda, MatchesPyTorchOnTheGpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const NdGoldenCase& c : nd_golden_cases()) {
    check_against_golden(nd_fixture(), ctx, c.name, c.yaml, c.num_tops);
  }
}

}  // namespace
}  // namespace crema::testing
