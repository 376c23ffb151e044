// Per-activation batch norm on CUDA against the CPU path (itself checked against a plain oracle in
// batch_norm_per_activation_test.cpp): training forward, running statistics and backward on
// awkward shapes, outputs poisoned with NaN first.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/batch_norm/batch_norm.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::rel_error;
using testing::to_device;

TEST(BatchNormPerActivationCuda, MatchesTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  Context cpu;
  Random rng(31);
  const Shape shapes[] = {{2, 3, 4, 5}, {5, 7}, {3, 1, 1, 1}, {32, 64, 7, 7}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape_str(shape));
    const Shape a(shape.begin() + 1, shape.end());
    const Tensor x = testing::random_tensor(rng, shape, -2, 2),
                 dy = testing::random_tensor(rng, shape);
    const Tensor gamma = testing::random_tensor(rng, a, 0.5, 1.5),
                 beta = testing::random_tensor(rng, a);
    // The CPU's results.
    Tensor y = testing::poisoned(shape), mean = testing::poisoned(a), invstd = testing::poisoned(a),
           rmean(a), rvar(a), count({1}), dx = testing::poisoned(shape), dgamma(a), dbeta(a);
    rmean.fill(0.0f);
    rvar.fill(1.0f);
    count.fill(0.0f);
    dgamma.fill(0.0f);
    dbeta.fill(0.0f);
    batch_norm_per_activation_forward_training(cpu, x, gamma, beta, 1e-5f, 0.1f, y, mean, invstd,
                                               rmean, rvar, count);
    batch_norm_per_activation_backward(cpu, x, dy, gamma, mean, invstd, true, dx, dgamma, dbeta);
    // The GPU's, from the same starting buffers.
    const Tensor xg = to_device(gpu, x), dyg = to_device(gpu, dy), gg = to_device(gpu, gamma),
                 bg = to_device(gpu, beta);
    Tensor yg = testing::poisoned_device(gpu, shape), mg = testing::poisoned_device(gpu, a),
           ig = testing::poisoned_device(gpu, a), rmg = gpu.empty(a), rvg = gpu.empty(a),
           cg = gpu.empty({1}), dxg = testing::poisoned_device(gpu, shape), dgg = gpu.empty(a),
           dbg = gpu.empty(a);
    gpu.fill(rmg, 0.0f);
    gpu.fill(rvg, 1.0f);
    gpu.fill(cg, 0.0f);
    gpu.fill(dgg, 0.0f);
    gpu.fill(dbg, 0.0f);
    batch_norm_per_activation_forward_training(gpu, xg, gg, bg, 1e-5f, 0.1f, yg, mg, ig, rmg, rvg,
                                               cg);
    batch_norm_per_activation_backward(gpu, xg, dyg, gg, mg, ig, true, dxg, dgg, dbg);
    // Both sum in double per activation; the orders differ, the float results by an ulp or so.
    EXPECT_LT(rel_error(host_values(gpu, yg), testing::to_double(y)), 1e-6);
    EXPECT_LT(rel_error(host_values(gpu, rmg), testing::to_double(rmean)), 1e-6);
    EXPECT_LT(rel_error(host_values(gpu, rvg), testing::to_double(rvar)), 1e-6);
    EXPECT_LT(rel_error(host_values(gpu, dxg), testing::to_double(dx)), 1e-5);
    EXPECT_LT(rel_error(host_values(gpu, dgg), testing::to_double(dgamma)), 1e-6);
    EXPECT_LT(rel_error(host_values(gpu, dbg), testing::to_double(dbeta)), 1e-6);
  }
}

}  // namespace
}  // namespace crema::kernels
