// Convolution and Pooling on 1-D and 3-D inputs against PyTorch's Conv1d, Conv3d, MaxPool1d/3d
// and AvgPool1d/3d (tests/fixtures/make_nd_fixtures.py): forward, argmax, input gradient and
// parameter gradients within 1e-5 relative in fp32 of PyTorch's float64 results, on awkward
// shapes. The GPU's run of the same cases is nd_golden_cuda_test.cpp.
#include <gtest/gtest.h>

#include "tests/fixtures/conv_fixture.h"
#include "tests/layers/nd_golden_cases.h"

namespace crema::testing {
namespace {

TEST(NdGolden, MatchesPyTorchOnTheCpu) {
  Context ctx;
  for (const NdGoldenCase& c : nd_golden_cases()) {
    check_against_golden(nd_fixture(), ctx, c.name, c.yaml, c.num_tops);
  }
}

}  // namespace
}  // namespace crema::testing
