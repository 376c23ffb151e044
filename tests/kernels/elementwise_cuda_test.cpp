// Elementwise helpers on CUDA: every version of the maps against ref<double> on odd sizes with
// poisoned outputs (and misaligned pointers), the sums against the reference and their
// determinism (single-block and multi-block), the bias helpers (the column-serial version bit for
// bit against the CPU path), and the Tensor-level dispatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/elementwise/elementwise.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

const cuda::MapVersion kVersions[] = {cuda::MapVersion::scalar, cuda::MapVersion::vectorized};

TEST(ElementwiseCuda, MapsMatchReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int64_t n : {1, 3, 7, 1000, 100003}) {
    Random rng(static_cast<uint64_t>(n));
    const Tensor x = testing::random_tensor(rng, {n}), y0 = testing::random_tensor(rng, {n});
    const std::vector<double> xd = testing::to_double(x), y0d = testing::to_double(y0);
    const Tensor xg = testing::to_device(ctx, x);
    for (cuda::MapVersion version : kVersions) {
      SCOPED_TRACE("n=" + std::to_string(n) + " version " + std::to_string(int(version)));
      Tensor t = testing::poisoned_device(ctx, {n});
      cuda::fill(n, 0.75f, t.data<float>(), version, ctx.stream());
      EXPECT_EQ(host_values(ctx, t), std::vector<float>(size_t(n), 0.75f));

      t = testing::to_device(ctx, y0);
      cuda::scale(n, -1.5f, t.data<float>(), version, ctx.stream());
      std::vector<double> want = y0d;
      ref::scale(n, -1.5, want.data());
      EXPECT_LT(testing::rel_error(host_values(ctx, t), want), 1e-7);

      t = testing::to_device(ctx, y0);
      cuda::axpy(n, 0.3f, xg.data<float>(), t.data<float>(), version, ctx.stream());
      want = y0d;
      ref::axpy(n, double(0.3f), xd.data(), want.data());
      EXPECT_LT(testing::rel_error(host_values(ctx, t), want), 1e-6);

      t = testing::to_device(ctx, y0);
      cuda::axpby(n, 0.3f, xg.data<float>(), -0.7f, t.data<float>(), version, ctx.stream());
      want = y0d;
      ref::axpby(n, double(0.3f), xd.data(), double(-0.7f), want.data());
      EXPECT_LT(testing::rel_error(host_values(ctx, t), want), 1e-6);

      t = testing::poisoned_device(ctx, {n});  // beta = 0: y is write-only
      cuda::axpby(n, 0.3f, xg.data<float>(), 0.0f, t.data<float>(), version, ctx.stream());
      ref::axpby(n, double(0.3f), xd.data(), 0.0, want.data());
      EXPECT_LT(testing::rel_error(host_values(ctx, t), want), 1e-7);

      t = testing::poisoned_device(ctx, {n});
      const Tensor y0g = testing::to_device(ctx, y0);
      cuda::add(n, xg.data<float>(), y0g.data<float>(), t.data<float>(), version, ctx.stream());
      ref::add(n, xd.data(), y0d.data(), want.data());
      EXPECT_LT(testing::rel_error(host_values(ctx, t), want), 1e-7);

      // In place: out aliases an input.
      Tensor alias = testing::to_device(ctx, x);
      cuda::add(n, alias.data<float>(), y0g.data<float>(), alias.data<float>(), version,
                ctx.stream());
      EXPECT_EQ(host_values(ctx, alias), host_values(ctx, t));
    }
  }
}

TEST(ElementwiseCuda, VectorizedMapWithMisalignedPointers) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t n = 1029;
  Random rng(8);
  const Tensor x = testing::random_tensor(rng, {n}), y0 = testing::random_tensor(rng, {n});
  const Tensor xg = testing::to_device(ctx, x);
  Tensor y = testing::to_device(ctx, y0);
  cuda::axpy(n - 2, 2.0f, xg.data<float>() + 1, y.data<float>() + 2, cuda::MapVersion::vectorized,
             ctx.stream());
  std::vector<double> want = testing::to_double(y0);
  const std::vector<double> xd = testing::to_double(x);
  ref::axpy(n - 2, 2.0, xd.data() + 1, want.data() + 2);
  EXPECT_LT(testing::rel_error(host_values(ctx, y), want), 1e-7);
}

TEST(ElementwiseCuda, SumsMatchReferenceAndRepeatBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // 1000 elements fit one block; 100003 and 3,000,017 need block partials and a finishing block.
  for (int64_t n : {0, 1, 7, 1000, 100003, 3000017}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Random rng(static_cast<uint64_t>(n) + 1);
    const Tensor x = testing::random_tensor(rng, {n}, -1, 3);
    const std::vector<double> xd = testing::to_double(x);
    const Tensor xg = testing::to_device(ctx, x);
    Tensor out = testing::poisoned_device(ctx, {});
    sum(ctx, xg, out);
    const float s = host_values(ctx, out)[0];
    EXPECT_NEAR(s, ref::sum(n, xd.data()), 1e-6 * std::max(1.0, std::abs(ref::sum(n, xd.data()))));
    sum_of_squares(ctx, xg, out);
    const float q = host_values(ctx, out)[0];
    const double q_ref = ref::sum_of_squares(n, xd.data());
    EXPECT_NEAR(q, q_ref, 1e-6 * std::max(1.0, q_ref));
    for (int repeat = 0; repeat < 3; ++repeat) {
      ctx.fill(out, kNaN);
      sum(ctx, xg, out);
      EXPECT_TRUE(testing::same_bits(host_values(ctx, out), {s}));
      sum_of_squares(ctx, xg, out);
      EXPECT_TRUE(testing::same_bits(host_values(ctx, out), {q}));
    }
  }
}

TEST(ElementwiseCuda, BiasRowsMatchReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 40;
  for (const Shape& shape : {Shape{1, 1}, Shape{5, 300}, Shape{64, 500}, Shape{256, 10},
                             Shape{2, 3, 7}, Shape{300, 257}, Shape{1000, 33}}) {
    SCOPED_TRACE(shape_str(shape));
    Random rng(++seed);
    const int64_t N = shape.back(), M = shape_numel(shape) / N;
    const Tensor bias = testing::random_tensor(rng, {N});
    const Tensor y0 = testing::random_tensor(rng, shape);
    const Tensor dbias0 = testing::random_tensor(rng, {N});

    Tensor y = testing::to_device(ctx, y0);
    add_bias_rows(ctx, testing::to_device(ctx, bias), y);
    Tensor y_cpu = y0.clone();
    cpu::add_bias_rows(M, N, bias.data<float>(), y_cpu.data<float>(), 1);
    EXPECT_TRUE(testing::same_bits(host_values(ctx, y), y_cpu.to_vector()));

    std::vector<double> dbias_ref = testing::to_double(dbias0);
    ref::accumulate_bias_rows(M, N, testing::to_double(y0).data(), dbias_ref.data());
    Tensor dbias_cpu = dbias0.clone();
    cpu::accumulate_bias_rows(M, N, y0.data<float>(), dbias_cpu.data<float>(), 1);
    const Tensor dyg = testing::to_device(ctx, y0);
    for (cuda::BiasVersion version :
         {cuda::BiasVersion::column_serial, cuda::BiasVersion::row_groups}) {
      Tensor dbias = testing::to_device(ctx, dbias0);
      cuda::accumulate_bias_rows(M, N, dyg.data<float>(), dbias.data<float>(), version,
                                 ctx.stream());
      const std::vector<float> got = host_values(ctx, dbias);
      EXPECT_LT(testing::rel_error(got, dbias_ref), 1e-6) << int(version);
      if (version == cuda::BiasVersion::column_serial) {
        EXPECT_TRUE(testing::same_bits(got, dbias_cpu.to_vector()));  // the CPU's order
      }
      Tensor again = testing::to_device(ctx, dbias0);
      cuda::accumulate_bias_rows(M, N, dyg.data<float>(), again.data<float>(), version,
                                 ctx.stream());
      EXPECT_TRUE(testing::same_bits(host_values(ctx, again), got));
    }
  }
}

TEST(ElementwiseCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  Random rng(12);
  const Tensor a = testing::random_tensor(rng, {3, 41}), b = testing::random_tensor(rng, {3, 41});
  Tensor out_cpu({3, 41});
  add(cpu_ctx, a, b, out_cpu);
  const Tensor ag = testing::to_device(ctx, a), bg = testing::to_device(ctx, b);
  Tensor out = testing::poisoned_device(ctx, {3, 41});
  add(ctx, ag, bg, out);
  EXPECT_TRUE(testing::same_bits(host_values(ctx, out), out_cpu.to_vector()));
  Tensor y = testing::to_device(ctx, b);
  axpby(ctx, 0.5f, ag, 0.25f, y);
  scale(ctx, 2.0f, y);
  axpy(ctx, -1.0f, ag, y);
  Tensor y_cpu = b.clone();
  axpby(cpu_ctx, 0.5f, a, 0.25f, y_cpu);
  scale(cpu_ctx, 2.0f, y_cpu);
  axpy(cpu_ctx, -1.0f, a, y_cpu);
  EXPECT_LT(testing::rel_error(host_values(ctx, y), testing::to_double(y_cpu)), 1e-6);
  fill(ctx, y, 3.0f);
  EXPECT_EQ(host_values(ctx, y), std::vector<float>(size_t(123), 3.0f));
  Tensor host_out({1});
  EXPECT_THROW(sum(ctx, ag, host_out), Error);  // the result must live on the device
}

}  // namespace
}  // namespace crema::kernels
