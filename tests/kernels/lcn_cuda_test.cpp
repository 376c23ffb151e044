// Divisive / local contrast normalization on CUDA: every pass against ref<double> on the awkward
// cases of the CPU tests with every blend (beta = 0 on NaN, beta = 1, alpha = 0.5), the same bits
// run to run, and the dispatch from device tensors against the CPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/lcn/lcn.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/lcn_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::rel_error;
using testing::to_device;

TEST(LcnCuda, EveryPassMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(12);
  for (const auto& [shape, p] : testing::lcn_awkward_cases()) {
    for (const testing::LcnBlend& b : testing::kLcnBlends) {
      SCOPED_TRACE(testing::lcn_str(shape, p) + " blend " + std::to_string(b.alpha) + " " +
                   std::to_string(b.beta));
      const LcnShape s = testing::lcn_shape(shape);
      const Tensor x = testing::random_tensor(rng, shape, -2, 2);
      const Tensor m = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
      const Tensor prior =
          b.beta == 0 ? testing::poisoned(shape) : testing::random_tensor(rng, shape);
      const testing::LcnReference r = testing::lcn_reference(shape, p, b, x, m, dy, prior);
      const float alpha = float(b.alpha), beta = float(b.beta);
      const Tensor xg = to_device(ctx, x), mg = to_device(ctx, m), dyg = to_device(ctx, dy);
      Tensor scratch = ctx.empty({kLcnBackwardScratch * s.numel()});
      for (int run = 0; run < 2; ++run) {
        Tensor y = to_device(ctx, prior), dx = to_device(ctx, prior), dm = to_device(ctx, prior),
               ly = to_device(ctx, prior), ldx = to_device(ctx, prior);
        cuda::divnorm_forward(s, p, alpha, xg.data<float>(), mg.data<float>(), beta,
                              y.data<float>(), ctx.stream());
        cuda::divnorm_backward(s, p, alpha, xg.data<float>(), mg.data<float>(), dyg.data<float>(),
                               beta, dx.data<float>(), dm.data<float>(), scratch.data<float>(),
                               ctx.stream());
        cuda::lcn_forward(s, p, alpha, xg.data<float>(), beta, ly.data<float>(),
                          scratch.data<float>(), ctx.stream());
        cuda::lcn_backward(s, p, alpha, xg.data<float>(), dyg.data<float>(), beta,
                           ldx.data<float>(), scratch.data<float>(), ctx.stream());
        EXPECT_LT(rel_error(host_values(ctx, y), r.divnorm_y), testing::kLcnTol);
        EXPECT_LT(rel_error(host_values(ctx, dx), r.divnorm_dx), testing::kLcnTol);
        EXPECT_LT(rel_error(host_values(ctx, dm), r.divnorm_dmeans), testing::kLcnTol);
        EXPECT_LT(rel_error(host_values(ctx, ly), r.lcn_y), testing::kLcnTol);
        EXPECT_LT(rel_error(host_values(ctx, ldx), r.lcn_dx), testing::kLcnTol);
      }
    }
  }
}

TEST(LcnCuda, TensorLevelMatchesTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  Context cpu;
  Random rng(15);
  const Shape shape{4, 8, 33, 31};
  const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
  const LcnParams p{9, 1.0, 0.5, 0.25};
  Tensor y = testing::poisoned(shape), dx = testing::poisoned(shape);
  lcn_forward(cpu, p, 1.0, x, 0.0, y);
  lcn_backward(cpu, p, 1.0, x, dy, 0.0, dx);
  const Tensor xg = to_device(gpu, x), dyg = to_device(gpu, dy);
  Tensor yg = testing::poisoned_device(gpu, shape), dxg = testing::poisoned_device(gpu, shape);
  lcn_forward(gpu, p, 1.0, xg, 0.0, yg);
  lcn_backward(gpu, p, 1.0, xg, dyg, 0.0, dxg);
  // Both paths sum windows in double in the same order; only pow and the float roundings of the
  // scratch may differ by an ulp.
  EXPECT_LT(rel_error(host_values(gpu, yg), testing::to_double(y)), 1e-6);
  EXPECT_LT(rel_error(host_values(gpu, dxg), testing::to_double(dx)), 1e-6);
}

}  // namespace
}  // namespace crema::kernels
