// Eltwise on CUDA: sum (with coefficients), product, its backward, max and its backward against
// ref<double> and bit for bit against the CPU path (both round each multiply and add
// separately), for 1 to 17 inputs (more than one launch takes) and odd sizes, outputs poisoned;
// determinism; the dispatch's device checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/elementwise/eltwise.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

TEST(EltwiseCuda, MatchesReferenceAndCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int K : {1, 2, 3, 8, 9, 17}) {
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(70001)}) {
      SCOPED_TRACE("K " + std::to_string(K) + " n " + std::to_string(n));
      Random rng(uint64_t(K * 100000 + n));
      std::vector<Tensor> xs, xg;
      std::vector<std::vector<double>> xds;
      for (int j = 0; j < K; ++j) {
        xs.push_back(testing::random_tensor(rng, {n}, -1.2, 1.2));
        xds.push_back(testing::to_double(xs.back()));
        xg.push_back(testing::to_device(ctx, xs.back()));
      }
      std::vector<const float*> xc, xgp;
      std::vector<const double*> xd;
      for (int j = 0; j < K; ++j) {
        xc.push_back(xs[size_t(j)].data<float>());
        xgp.push_back(xg[size_t(j)].data<float>());
        xd.push_back(xds[size_t(j)].data());
      }
      std::vector<float> coeff;
      for (int j = 0; j < K; ++j) coeff.push_back(0.5f * float(j % 4) - 0.6f);
      const std::vector<double> coeff_d(coeff.begin(), coeff.end());
      const Tensor dy = testing::random_tensor(rng, {n});
      const Tensor dyg = testing::to_device(ctx, dy);
      const std::vector<double> dyd = testing::to_double(dy);
      const size_t un = size_t(n);
      std::vector<double> want(un), want_arg(un);
      Tensor cpu_out({n}), cpu_arg({n});
      Tensor y = testing::poisoned_device(ctx, {n}), arg = testing::poisoned_device(ctx, {n});

      ref::eltwise_sum(n, K, xd.data(), coeff_d.data(), want.data());
      cpu::eltwise_sum(n, K, xc.data(), coeff.data(), cpu_out.data<float>(), 1);
      cuda::eltwise_sum(n, K, xgp.data(), coeff.data(), y.data<float>(), ctx.stream());
      std::vector<float> got = host_values(ctx, y);
      EXPECT_LT(testing::rel_error(got, want), 1e-6) << "sum";
      EXPECT_TRUE(testing::same_bits(got, cpu_out.to_vector())) << "sum";

      ctx.fill(y, testing::kNaN);
      ref::eltwise_prod(n, K, xd.data(), want.data());
      cpu::eltwise_prod(n, K, xc.data(), cpu_out.data<float>(), 1);
      cuda::eltwise_prod(n, K, xgp.data(), y.data<float>(), ctx.stream());
      got = host_values(ctx, y);
      EXPECT_LT(testing::rel_error(got, want), 1e-6) << "prod";
      EXPECT_TRUE(testing::same_bits(got, cpu_out.to_vector())) << "prod";

      for (int i : {0, K - 1}) {
        ctx.fill(y, testing::kNaN);
        ref::eltwise_prod_backward(n, K, xd.data(), i, dyd.data(), want.data());
        cpu::eltwise_prod_backward(n, K, xc.data(), i, dy.data<float>(), cpu_out.data<float>(), 1);
        cuda::eltwise_prod_backward(n, K, xgp.data(), i, dyg.data<float>(), y.data<float>(),
                                    ctx.stream());
        got = host_values(ctx, y);
        EXPECT_LT(testing::rel_error(got, want), 1e-6) << "prod backward " << i;
        EXPECT_TRUE(testing::same_bits(got, cpu_out.to_vector())) << "prod backward " << i;
      }

      ctx.fill(y, testing::kNaN);
      ref::eltwise_max(n, K, xd.data(), want.data(), want_arg.data());
      cuda::eltwise_max(n, K, xgp.data(), y.data<float>(), arg.data<float>(), ctx.stream());
      EXPECT_EQ(testing::rel_error(host_values(ctx, y), want), 0.0) << "max";
      EXPECT_EQ(testing::rel_error(host_values(ctx, arg), want_arg), 0.0) << "argmax";

      for (int i : {0, K - 1}) {
        ctx.fill(y, testing::kNaN);
        ref::eltwise_max_backward(n, i, dyd.data(), want_arg.data(), want.data());
        cuda::eltwise_max_backward(n, i, dyg.data<float>(), arg.data<float>(), y.data<float>(),
                                   ctx.stream());
        EXPECT_EQ(testing::rel_error(host_values(ctx, y), want), 0.0) << "max backward " << i;
      }
    }
  }
}

TEST(EltwiseCuda, TiesNaNAndDeterminism) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // Ten inputs (two launches: 0-7, 8-9). Element 0 ties among inputs 2, 5 and 8 (8 in the second
  // launch): input 2 wins. Input 9 holds a NaN at element 1: it wins from the second launch.
  const int K = 10;
  std::vector<Tensor> xg;
  std::vector<const float*> x;
  for (int j = 0; j < K; ++j) {
    std::vector<float> v = {float(j % 3), -float(j), 0.1f * float(j)};
    if (j == 9) v[1] = testing::kNaN;
    xg.push_back(testing::to_device(ctx, {3}, v));
  }
  for (const Tensor& t : xg) x.push_back(t.data<float>());
  Tensor y = testing::poisoned_device(ctx, {3}), arg = testing::poisoned_device(ctx, {3});
  cuda::eltwise_max(3, K, x.data(), y.data<float>(), arg.data<float>(), ctx.stream());
  const std::vector<float> yv = host_values(ctx, y), av = host_values(ctx, arg);
  EXPECT_EQ(yv[0], 2.0f);
  EXPECT_EQ(av[0], 2.0f);
  EXPECT_TRUE(std::isnan(yv[1]));
  EXPECT_EQ(av[1], 9.0f);
  EXPECT_EQ(av[2], 9.0f);

  std::vector<float> coeff(size_t(K), 0.3f);
  cuda::eltwise_sum(3, K, x.data(), coeff.data(), y.data<float>(), ctx.stream());
  const std::vector<float> first = host_values(ctx, y);
  ctx.fill(y, testing::kNaN);
  cuda::eltwise_sum(3, K, x.data(), coeff.data(), y.data<float>(), ctx.stream());
  EXPECT_TRUE(testing::same_bits(host_values(ctx, y), first));
}

TEST(EltwiseCuda, DispatchChecksDevices) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor host({4});
  host.fill(1.0f);
  const Tensor dev = testing::to_device(ctx, host);
  Tensor y = ctx.empty({4});
  EXPECT_THROW(eltwise_sum(ctx, {&dev, &host}, {1.0f, 1.0f}, y), Error);
  eltwise_sum(ctx, {&dev, &dev}, {1.0f, 2.0f}, y);
  EXPECT_EQ(host_values(ctx, y), (std::vector<float>{3, 3, 3, 3}));
}

}  // namespace
}  // namespace crema::kernels
