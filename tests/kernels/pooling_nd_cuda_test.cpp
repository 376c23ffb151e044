// N-d pooling on the GPU: forward (max with argmax, average with and without count_include_pad)
// and backward of the Tensor-level calls against the CPU's on the awkward geometries of
// pooling_nd_test_util.h, outputs poisoned with NaN. The GPU runs the CPU's comparisons and sums
// in the CPU's order: y, argmax and dx are expected bit for bit.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/pooling/pooling_nd.h"
#include "tests/kernels/pooling_nd_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::pool_test {
namespace {

std::vector<float> random_values(Random& rng, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = float(rng.uniform(-1.0, 1.0));
  return v;
}

// y, argmax (max mode) and dx of one context's passes, as host floats.
std::vector<std::vector<float>> run_passes(Context& ctx, const PoolNdGeometry& g, PoolMode mode,
                                           const std::vector<float>& x,
                                           const std::vector<float>& dy) {
  auto put = [&](const Shape& shape, const std::vector<float>& host) {
    Tensor t = ctx.empty(shape);
    t.copy_from(Tensor::from_vector(shape, host));
    return t;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor xt = put(g.x_shape(), x), dyt = put(g.y_shape(), dy);
  Tensor y = ctx.empty(g.y_shape()), argmax = ctx.empty(g.y_shape()), dx = ctx.empty(g.x_shape());
  ctx.fill(y, nan);
  ctx.fill(argmax, nan);
  ctx.fill(dx, nan);
  Tensor* a = mode == PoolMode::max ? &argmax : nullptr;
  pool_nd_forward(ctx, g, mode, xt, y, a);
  pool_nd_backward(ctx, g, mode, dyt, a, dx);
  ctx.synchronize();
  return {y.to_vector(), mode == PoolMode::max ? argmax.to_vector() : std::vector<float>{},
          dx.to_vector()};
}

TEST(PoolingNdCuda, MatchesCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu(Device::cpu(), 1, 2);
  std::vector<PoolNdGeometry> geometries = pool_geometries();
  geometries.push_back(make_pool(3, 4, 16, {16, 28, 28}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false,
                                 true));  // C3D's pool2
  Random rng(21);
  for (const PoolNdGeometry& g : geometries) {
    const std::vector<float> x = random_values(rng, g.N * g.C * g.in_volume());
    const std::vector<float> dy = random_values(rng, g.N * g.C * g.out_volume());
    for (const PoolMode mode : {PoolMode::max, PoolMode::average}) {
      SCOPED_TRACE(describe(g) + (mode == PoolMode::max ? " max" : " average"));
      const auto on_gpu = run_passes(gpu, g, mode, x, dy);
      const auto on_cpu = run_passes(cpu, g, mode, x, dy);
      EXPECT_EQ(on_gpu[0], on_cpu[0]) << "y";
      EXPECT_EQ(on_gpu[1], on_cpu[1]) << "argmax";
      EXPECT_EQ(on_gpu[2], on_cpu[2]) << "dx";
    }
  }
}

}  // namespace
}  // namespace crema::kernels::pool_test
