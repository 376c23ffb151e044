// The primitive API (kernels/api/) on CUDA: the CPU suite's cases (api_test_cases.h) with the
// tensors in device memory: f32 against the f64 reference on the CPU, the blends, and every
// strided variant bit for bit equal to the contiguous result (api_test_util.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

INSTANTIATE_TEST_SUITE_P(Primitives, ApiCudaCase, ::testing::Range(size_t(0), api_cases().size()),
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

// A packed descriptor one float past an aligned address is gathered and staged, not borrowed
// (the kernels' vector loads expect 16-byte aligned tensors): the result is still right.
TEST(ApiCuda, MisalignedPackedDescriptors) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  std::vector<float> values(41);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(int(i % 9) - 4);
  Tensor dev = ctx.empty({41});
  dev.copy_from(Tensor::from_vector({41}, values));
  float* base = dev.data<float>();
  const TensorDesc x = TensorDesc::contiguous(base + 1, DType::f32, ctx.device(), {4, 5});
  const TensorDesc y = TensorDesc::contiguous(base + 21, DType::f32, ctx.device(), {4, 5});
  activation_forward(ctx, ActivationDesc{}, 1.0, x, 0.0, y);
  ctx.synchronize();
  const std::vector<float> out = dev.to_vector();
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(out[size_t(21 + i)], std::max(values[size_t(1 + i)], 0.0f));
  EXPECT_EQ(out[0], values[0]);
  EXPECT_EQ(out[1], values[1]);  // x unchanged
}

}  // namespace
}  // namespace crema::kernels::api
