// Pooling on CUDA: forward (values and argmax) and the gather backward against ref<double> and
// bit for bit against the CPU path on awkward geometries (padding, partial ceil-mode windows,
// overlapping windows, gaps between windows, N = 1, LeNet's real shapes; average pooling with and
// without counting the padding; global pooling), with poisoned outputs;
// ties and NaN; bit-identical repeats; the dispatch's device checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/pooling/pooling.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/pooling_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

using testing::describe;
using testing::geometry;

bool same_or_both_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

// x: the input values (host). Checks forward and backward against ref<double> and the CPU path.
void check_cuda(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const std::vector<float>& x,
                uint64_t seed) {
  const bool max = mode == PoolMode::max;
  SCOPED_TRACE(describe(g) + (max ? " max" : " average") +
               (g.count_include_pad ? "" : " excluding padding"));
  Random rng(seed);
  const Shape xs = {g.N, g.C, g.H, g.W}, ys = {g.N, g.C, g.P, g.Q};
  const Tensor xh = Tensor::from_vector(xs, x), dyh = testing::random_tensor(rng, ys);

  const Tensor xg = testing::to_device(ctx, xh), dyg = testing::to_device(ctx, dyh);
  Tensor y = testing::poisoned_device(ctx, ys), argmax = testing::poisoned_device(ctx, ys);
  Tensor dx = testing::poisoned_device(ctx, xs);
  pool2d_forward(ctx, g, mode, xg, y, max ? &argmax : nullptr);
  pool2d_backward(ctx, g, mode, dyg, max ? &argmax : nullptr, dx);
  const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);

  Context cpu_ctx(Device::cpu(), 1, 1);
  Tensor y_cpu(ys), argmax_cpu(ys), dx_cpu(xs);
  pool2d_forward(cpu_ctx, g, mode, xh, y_cpu, max ? &argmax_cpu : nullptr);
  pool2d_backward(cpu_ctx, g, mode, dyh, max ? &argmax_cpu : nullptr, dx_cpu);
  EXPECT_TRUE(same_or_both_nan(yv, y_cpu.to_vector()));
  EXPECT_TRUE(same_or_both_nan(dxv, dx_cpu.to_vector()));
  if (max) {
    EXPECT_EQ(host_values(ctx, argmax), argmax_cpu.to_vector());
  }
  if (testing::count_nan(x) > 0) return;  // the reference comparison needs finite values

  const std::vector<double> xd = testing::to_double(xh), dyd = testing::to_double(dyh);
  std::vector<double> y_ref(size_t(shape_numel(ys))), argmax_ref(y_ref.size());
  std::vector<double> dx_ref(size_t(shape_numel(xs)));
  ref::pool2d_forward(g, mode, xd.data(), y_ref.data(), argmax_ref.data());
  ref::pool2d_backward(g, mode, dyd.data(), argmax_ref.data(), dx_ref.data());
  EXPECT_LT(testing::rel_error(yv, y_ref), 1e-6);
  EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-6);
  if (max) {
    EXPECT_EQ(testing::to_double(host_values(ctx, argmax)), argmax_ref);
  }
}

TEST(Pool2dCuda, MatchesReferenceOnAwkwardGeometries) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Pool2dGeometry> cases = {
      geometry(1, 1, 1, 1, 1, 1, 0, false),      // a single element
      geometry(64, 20, 24, 24, 2, 2, 0, false),  // LeNet pool1
      geometry(64, 50, 8, 8, 2, 2, 0, false),    // LeNet pool2
      geometry(1, 3, 7, 9, 2, 2, 0, true),       // N = 1, odd sizes, partial last windows
      geometry(1, 2, 13, 11, 3, 2, 0, true),     // overlapping windows (AlexNet's 3/2), ceil
      geometry(3, 2, 9, 8, 3, 2, 1, false),      // stride 2 with padding
      geometry(2, 1, 10, 7, 3, 3, 2, true),      // padding 2, stride = kernel
      geometry(1, 1, 6, 17, 5, 1, 2, false),     // stride 1: up to 25 windows per element
      geometry(1, 2, 11, 13, 2, 3, 1, true),     // stride > kernel: elements in no window
      geometry(2, 1, 2, 2, 3, 2, 1, true),       // every window clipped
      geometry(3, 5, 37, 37, 3, 2, 1, true),
      geometry(4, 6, 7, 7, 7, 1, 0, false),  // global pooling of a 7x7 plane
  };
  std::vector<Pool2dGeometry> all = cases;
  all.push_back({2, 3, 11, 8, 3, 2, 2, 1, 1, 0, pool2d_output_extent(11, 3, 2, 1, true),
                 pool2d_output_extent(8, 2, 1, 0, true)});  // rectangular, per-axis strides
  uint64_t seed = 50;
  for (const Pool2dGeometry& g : all) {
    Random rng(++seed);
    const std::vector<float> x = testing::random_values(rng, g.N * g.C * g.H * g.W);
    for (PoolMode mode : {PoolMode::max, PoolMode::average}) check_cuda(ctx, g, mode, x, ++seed);
    Pool2dGeometry exclude = g;  // average over the input only (PyTorch's count_include_pad=False)
    exclude.count_include_pad = false;
    check_cuda(ctx, exclude, PoolMode::average, x, ++seed);
  }
}

TEST(Pool2dCuda, TiesAndNaNPickTheSameElementAsTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Pool2dGeometry g = geometry(2, 3, 9, 10, 3, 2, 1, true);
  Random rng(5);
  std::vector<float> x(static_cast<size_t>(g.N * g.C * g.H * g.W));
  for (float& v : x) v = float(rng.below(3));  // ties in almost every window
  check_cuda(ctx, g, PoolMode::max, x, 1);
  x[17] = x[200] = kNaN;
  check_cuda(ctx, g, PoolMode::max, x, 2);
  check_cuda(ctx, g, PoolMode::average, x, 3);
}

TEST(Pool2dCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Pool2dGeometry g = geometry(4, 6, 17, 15, 3, 2, 1, true);
  Random rng(9);
  const Tensor xg = testing::to_device(ctx, testing::random_tensor(rng, {g.N, g.C, g.H, g.W}));
  const Tensor dyg = testing::to_device(ctx, testing::random_tensor(rng, {g.N, g.C, g.P, g.Q}));
  for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
    const bool max = mode == PoolMode::max;
    std::vector<float> first_y, first_dx;
    for (int run = 0; run < 3; ++run) {
      Tensor y = testing::poisoned_device(ctx, dyg.shape());
      Tensor argmax = testing::poisoned_device(ctx, dyg.shape());
      Tensor dx = testing::poisoned_device(ctx, xg.shape());
      pool2d_forward(ctx, g, mode, xg, y, max ? &argmax : nullptr);
      pool2d_backward(ctx, g, mode, dyg, max ? &argmax : nullptr, dx);
      const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
      if (run == 0) {
        first_y = yv;
        first_dx = dxv;
      } else {
        EXPECT_TRUE(testing::same_bits(yv, first_y));
        EXPECT_TRUE(testing::same_bits(dxv, first_dx));
      }
    }
  }
}

TEST(Pool2dCuda, RejectsTensorsOnAnotherDevice) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Pool2dGeometry g = geometry(1, 2, 6, 6, 2, 2, 0, false);
  const Tensor x = testing::poisoned_device(ctx, {1, 2, 6, 6});
  Tensor y_host({1, 2, 3, 3});
  EXPECT_THROW(pool2d_forward(ctx, g, PoolMode::average, x, y_host, nullptr), Error);
}

}  // namespace
}  // namespace crema::kernels
