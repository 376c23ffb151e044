// The InnerProduct layer on the GPU against the CPU (check_cuda_parity): shapes, axis, no bias,
// frozen parameters.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

TEST(InnerProductLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  const std::string fc = "{name: fc, type: InnerProduct, bias_filler: {type: uniform}, ";
  check_cuda_parity(fc + "num_output: 500}", {{5, 50, 4, 4}});  // LeNet's ip1 at N = 5
  check_cuda_parity(fc + "num_output: 7, axis: 2}", {{3, 4, 5, 2}});
  check_cuda_parity(fc + "num_output: 3, bias_term: false}", {{1, 9}});
  check_cuda_parity(fc + "num_output: 13, axis: -1}", {{1, 7, 5, 12}});  // channels last
}

TEST(InnerProductLayerCuda, MatchesCpuFrozenParameters) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: fc, type: InnerProduct, num_output: 6, param: {weight: {lr_mult: 0}}}",
                    {{4, 11}});
  check_cuda_parity("{name: fc, type: InnerProduct, num_output: 6, param: {bias: {lr_mult: 0}}}",
                    {{4, 11}});
}

}  // namespace
}  // namespace crema::testing
