// ReLU on CUDA: every version against ref<double> (and bit for bit against the CPU path) on odd
// sizes with poisoned outputs, misaligned pointers (the vectorized version's fallback), in-place
// use, and the dispatch's device checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/activations/relu.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

const cuda::ReluVersion kVersions[] = {cuda::ReluVersion::scalar, cuda::ReluVersion::vectorized};

TEST(ReluCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int64_t n : {1, 3, 7, 1000, 32000, 100003}) {
    for (float slope : {0.0f, 0.1f}) {
      Random rng(static_cast<uint64_t>(n));
      const Tensor x = testing::random_tensor(rng, {n}), dy = testing::random_tensor(rng, {n});
      const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
      std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
      ref::relu_forward(n, xd.data(), y_ref.data(), double(slope));
      ref::relu_backward(n, y_ref.data(), dyd.data(), dx_ref.data(), double(slope));
      Tensor y_cpu(x.shape()), dx_cpu(x.shape());
      cpu::relu_forward(n, x.data<float>(), y_cpu.data<float>(), slope, 1);
      cpu::relu_backward(n, y_cpu.data<float>(), dy.data<float>(), dx_cpu.data<float>(), slope, 1);
      const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
      for (cuda::ReluVersion version : kVersions) {
        SCOPED_TRACE("n=" + std::to_string(n) + " slope=" + std::to_string(slope) + " version " +
                     std::to_string(int(version)));
        Tensor y = testing::poisoned_device(ctx, {n}), dx = testing::poisoned_device(ctx, {n});
        cuda::relu_forward(n, xg.data<float>(), y.data<float>(), slope, version, ctx.stream());
        cuda::relu_backward(n, y.data<float>(), dyg.data<float>(), dx.data<float>(), slope, version,
                            ctx.stream());
        const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
        EXPECT_LT(testing::rel_error(yv, y_ref), 1e-6);
        EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-6);
        EXPECT_TRUE(testing::same_bits(yv, y_cpu.to_vector()));
        EXPECT_TRUE(testing::same_bits(dxv, dx_cpu.to_vector()));
      }
    }
  }
}

TEST(ReluCuda, MisalignedPointersFallBackToScalar) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t n = 1031;
  Random rng(3);
  const Tensor x = testing::random_tensor(rng, {n});
  std::vector<double> y_ref(static_cast<size_t>(n - 1));
  const std::vector<double> xd = testing::to_double(x);
  ref::relu_forward(n - 1, xd.data() + 1, y_ref.data(), 0.1);
  const Tensor xg = testing::to_device(ctx, x);
  Tensor y = testing::poisoned_device(ctx, {n});
  // Inputs and outputs one float past a 16-byte boundary.
  cuda::relu_forward(n - 1, xg.data<float>() + 1, y.data<float>() + 1, 0.1f,
                     cuda::ReluVersion::vectorized, ctx.stream());
  std::vector<float> yv = host_values(ctx, y);
  EXPECT_TRUE(std::isnan(yv[0]));  // not written
  yv.erase(yv.begin());
  EXPECT_LT(testing::rel_error(yv, y_ref), 1e-6);
}

TEST(ReluCuda, InPlaceAndDispatch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  Random rng(4);
  const Tensor x = testing::random_tensor(rng, {7, 33}), dy = testing::random_tensor(rng, {7, 33});
  Tensor y_cpu(x.shape()), dx_cpu(x.shape());
  relu_forward(cpu_ctx, x, y_cpu, 0.2f);
  relu_backward(cpu_ctx, y_cpu, dy, dx_cpu, 0.2f);
  Tensor t = testing::to_device(ctx, x), g = testing::to_device(ctx, dy);
  relu_forward(ctx, t, t, 0.2f);
  relu_backward(ctx, t, g, g, 0.2f);
  EXPECT_TRUE(testing::same_bits(host_values(ctx, t), y_cpu.to_vector()));
  EXPECT_TRUE(testing::same_bits(host_values(ctx, g), dx_cpu.to_vector()));
  // A host tensor given to a CUDA context is a user error, named.
  Tensor host_y(x.shape());
  try {
    relu_forward(ctx, t, host_y, 0.0f);
    ADD_FAILURE() << "a host output was accepted on a CUDA context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("on cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
