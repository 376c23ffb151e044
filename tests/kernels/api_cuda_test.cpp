// The primitive API (kernels/api/) on CUDA: the CPU suite's cases (api_test_cases.h) with the
// tensors in device memory: f32 against the f64 reference on the CPU, the blends, and every
// strided variant bit for bit equal to the contiguous result (api_test_util.h).
#include <gtest/gtest.h>

#include "kernels/api/primitives.h"
#include "tests/kernels/api_test_cases.h"
#include "tests/kernels/api_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::api {
namespace {

using testing::api_cases;
using testing::Case;

class ApiCudaCase : public ::testing::TestWithParam<size_t> {};

TEST_P(ApiCudaCase, MatchesReferenceBlendsAndStrides) {
  CREMA_REQUIRE_CUDA();
  const Case c = api_cases()[GetParam()];
  Context ctx(Device::cuda(0));
  testing::check_case(ctx, c);
}

INSTANTIATE_TEST_SUITE_P(Primitives, ApiCudaCase,
                         ::testing::Range(size_t(0), api_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return api_cases()[info.param].name;
                         });

// In place on the device: y = relu(y) on a strided view.
TEST(ApiCuda, ActivationOnItsOwnStridedView) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor host = Tensor::from_vector({8}, {-1, 9, 2, 9, -3, 9, 4, 9});
  Tensor dev = ctx.empty({8});
  dev.copy_from(host);
  const TensorDesc v = TensorDesc::strided(dev.raw(), DType::f32, ctx.device(), {4}, {2});
  activation_forward(ctx, ActivationDesc{}, 1.0, v, 0.0, v);
  ctx.synchronize();
  EXPECT_EQ(dev.to_vector(), (std::vector<float>{0, 9, 2, 9, 0, 9, 4, 9}));
}

}  // namespace
}  // namespace crema::kernels::api
