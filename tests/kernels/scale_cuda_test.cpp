// Per-channel scale/bias and channel sums on CUDA: the forward against ref<double> and bit for
// bit against the CPU, every channel_reduce version against ref<double> (both sum in double) on
// shapes that take one block per channel, split channels (small C, large outer * inner) and many
// channels; accumulate vs write; determinism; in-place forward; the dispatch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/scale/scale.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/scale_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::scale_test {
namespace {

using testing::host_values;

const cuda::ReduceVersion kVersions[] = {cuda::ReduceVersion::block_per_channel,
                                         cuda::ReduceVersion::split, cuda::ReduceVersion::planes};

TEST(ScaleCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // planes (inner >= 256): {2, 1, 100003} (floats, pieces across plane ends), {64, 20, 576}
  // (float4, segments of several planes), {9, 3, 4099} (odd planes), {37, 5, 256} (float4, one
  // segment), {3, 2, 20000} (segments within a plane).
  const Case cases[] = {{1, 1, 1},    {2, 3, 5},     {1, 7, 1},      {5, 1, 33},
                        {3, 20, 1},   {64, 20, 576}, {2, 1, 100003}, {4, 2000, 3},
                        {9, 3, 4099}, {37, 5, 256},  {3, 2, 20000}};
  for (const Case& c : cases) {
    const int64_t n = c.outer * c.C * c.inner;
    const auto [x, dy, s, b, xd, dyd, sd, bd] =
        random_inputs(c, uint64_t(c.outer * 7 + c.C * 3 + c.inner));
    const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
    const Tensor sg = testing::to_device(ctx, s), bg = testing::to_device(ctx, b);
    SCOPED_TRACE(str(c));

    std::vector<double> want(static_cast<size_t>(n));
    ref::scale_forward(c.outer, c.C, c.inner, xd.data(), sd.data(), bd.data(), want.data());
    Tensor cpu_y({n});
    cpu::scale_forward(c.outer, c.C, c.inner, x.data<float>(), s.data<float>(), b.data<float>(),
                       cpu_y.data<float>(), 1);
    Tensor y = testing::poisoned_device(ctx, {n});
    cuda::scale_forward(c.outer, c.C, c.inner, xg.data<float>(), sg.data<float>(), bg.data<float>(),
                        y.data<float>(), ctx.stream());
    const std::vector<float> yv = host_values(ctx, y);
    EXPECT_LT(testing::rel_error(yv, want), 1e-6);
    EXPECT_TRUE(testing::same_bits(yv, cpu_y.to_vector()));
    Tensor in_place = testing::to_device(ctx, x);
    cuda::scale_forward(c.outer, c.C, c.inner, in_place.data<float>(), sg.data<float>(),
                        bg.data<float>(), in_place.data<float>(), ctx.stream());
    EXPECT_TRUE(testing::same_bits(host_values(ctx, in_place), yv));

    for (cuda::ReduceVersion version : kVersions) {
      for (bool with_x : {true, false}) {
        SCOPED_TRACE(std::string("version ") + std::to_string(int(version)) +
                     (with_x ? " dy * x" : " dy"));
        std::vector<double> sums(size_t(c.C));
        ref::channel_reduce(c.outer, c.C, c.inner, dyd.data(), with_x ? xd.data() : nullptr, false,
                            sums.data());
        const size_t bytes = cuda::channel_reduce_workspace_bytes(c.outer, c.C, c.inner, version);
        Tensor workspace = ctx.empty({int64_t(bytes / sizeof(float)) + 1});
        const float* xp = with_x ? xg.data<float>() : nullptr;
        Tensor out = testing::poisoned_device(ctx, {c.C});
        cuda::channel_reduce(c.outer, c.C, c.inner, dyg.data<float>(), xp, false, out.data<float>(),
                             workspace.data<float>(), version, ctx.stream());
        const std::vector<float> first = host_values(ctx, out);
        EXPECT_LT(testing::rel_error(first, sums), 1e-6);
        ctx.fill(out, testing::kNaN);
        cuda::channel_reduce(c.outer, c.C, c.inner, dyg.data<float>(), xp, false, out.data<float>(),
                             workspace.data<float>(), version, ctx.stream());
        EXPECT_TRUE(testing::same_bits(host_values(ctx, out), first));
        // Accumulating onto s.
        Tensor acc = testing::to_device(ctx, s);
        cuda::channel_reduce(c.outer, c.C, c.inner, dyg.data<float>(), xp, true, acc.data<float>(),
                             workspace.data<float>(), version, ctx.stream());
        std::vector<double> want_acc(size_t(c.C));
        for (size_t k = 0; k < want_acc.size(); ++k) want_acc[k] = sd[k] + sums[k];
        EXPECT_LT(testing::rel_error(host_values(ctx, acc), want_acc), 1e-6);
      }
    }
  }
}

TEST(ScaleCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  Random rng(9);
  const Tensor x = testing::random_tensor(rng, {8, 16, 7, 7}),
               s = testing::random_tensor(rng, {16});
  const Tensor xg = testing::to_device(ctx, x), sg = testing::to_device(ctx, s);
  Tensor y_cpu(x.shape()), y = testing::poisoned_device(ctx, x.shape());
  scale_forward(cpu_ctx, x, &s, nullptr, 1, 1, y_cpu);
  scale_forward(ctx, xg, &sg, nullptr, 1, 1, y);
  EXPECT_TRUE(testing::same_bits(host_values(ctx, y), y_cpu.to_vector()));
  Tensor out_cpu({16}), out = testing::poisoned_device(ctx, {16});
  channel_reduce(cpu_ctx, x, &x, 1, 1, false, out_cpu);
  channel_reduce(ctx, xg, &xg, 1, 1, false, out);
  EXPECT_LT(testing::rel_error(host_values(ctx, out), testing::to_double(out_cpu)), 1e-6);
  EXPECT_THROW(scale_forward(ctx, xg, &s, nullptr, 1, 1, y), Error);  // s is on the host
}

}  // namespace
}  // namespace crema::kernels::scale_test
