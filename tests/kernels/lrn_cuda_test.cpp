// LRN on CUDA: every version against ref<double> in both regions on awkward shapes (a single
// element, windows wider than the channels or the plane, a window of one) and LeNet / AlexNet
// sizes, with poisoned outputs; bit-identical repeats of the best version; the dispatch's device
// checks.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/lrn/lrn.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/lrn_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::LrnVersion;
using testing::host_values;
using testing::lrn_params;
using testing::rel_error;

std::string describe(const Shape& shape, const LrnParams& p, LrnVersion v) {
  return shape_str(shape) + (p.region == LrnRegion::across_channels ? " across" : " within") +
         " size " + std::to_string(p.local_size) +
         (v == LrnVersion::direct ? " direct" : " sliding");
}

void check_version(Context& ctx, const Shape& shape, const LrnParams& p, LrnVersion version,
                   uint64_t seed) {
  SCOPED_TRACE(describe(shape, p, version));
  Random rng(seed);
  const std::vector<float> xv = testing::random_values(rng, shape_numel(shape), -2.0, 2.0);
  const std::vector<float> dyv = testing::random_values(rng, shape_numel(shape));
  const Tensor x = testing::to_device(ctx, shape, xv), dy = testing::to_device(ctx, shape, dyv);
  Tensor y = testing::poisoned_device(ctx, shape), scale = testing::poisoned_device(ctx, shape);
  Tensor dx = testing::poisoned_device(ctx, shape);
  const LrnShape s = testing::lrn_shape(shape);
  cuda::lrn_forward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(), version,
                    ctx.stream());
  cuda::lrn_backward(s, p, x.data<float>(), y.data<float>(), scale.data<float>(), dy.data<float>(),
                     dx.data<float>(), version, ctx.stream());

  const testing::LrnReference r =
      testing::lrn_reference(shape, p, testing::to_double(xv), testing::to_double(dyv));
  EXPECT_LT(rel_error(host_values(ctx, y), r.y), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, scale), r.scale), 1e-5);
  EXPECT_LT(rel_error(host_values(ctx, dx), r.dx), 1e-5);
}

TEST(LrnCuda, EveryVersionMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const LrnRegion across = LrnRegion::across_channels, within = LrnRegion::within_channel;
  std::vector<std::pair<Shape, LrnParams>> cases = testing::lrn_awkward_cases();
  cases.emplace_back(Shape{64, 20, 24, 24},
                     lrn_params(across, 5, 1e-4f, 0.75f, 1.0f));  // LeNet conv1's output
  cases.emplace_back(Shape{64, 20, 24, 24}, lrn_params(within, 3, 0.5f, 0.75f, 1.0f));
  cases.emplace_back(Shape{8, 96, 27, 27},
                     lrn_params(across, 5, 1e-4f, 0.75f, 2.0f));  // AlexNet norm1-like
  cases.emplace_back(Shape{5, 33, 9, 11}, lrn_params(across, 3, 2.0f, 0.9f, 1.5f));
  uint64_t seed = 1;
  for (const auto& [shape, p] : cases) {
    for (const LrnVersion v : {LrnVersion::direct, LrnVersion::sliding}) {
      check_version(ctx, shape, p, v, seed);
    }
    ++seed;
  }
}

TEST(LrnCuda, BestIsDeterministic) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape{16, 32, 13, 13};
  Random rng(5);
  const Tensor x = testing::to_device(ctx, shape, testing::random_values(rng, shape_numel(shape)));
  const Tensor dy = testing::to_device(ctx, shape, testing::random_values(rng, shape_numel(shape)));
  for (const LrnRegion region : {LrnRegion::across_channels, LrnRegion::within_channel}) {
    const LrnParams p = lrn_params(region, 5, 1.0f, 0.75f, 1.0f);
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 2; ++run) {
      Tensor y = testing::poisoned_device(ctx, shape), scale = testing::poisoned_device(ctx, shape);
      Tensor dx = testing::poisoned_device(ctx, shape);
      lrn_forward(ctx, p, x, y, scale);
      lrn_backward(ctx, p, x, y, scale, dy, dx);
      std::vector<float> all = host_values(ctx, y), d = host_values(ctx, dx);
      all.insert(all.end(), d.begin(), d.end());
      EXPECT_EQ(testing::count_nan(all), 0);
      runs.push_back(all);
    }
    EXPECT_TRUE(testing::same_bits(runs[0], runs[1]));
  }
}

TEST(LrnCuda, RejectsTensorsOnAnotherDevice) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape{1, 3, 2, 2};
  Tensor host_x(shape), y = ctx.empty(shape), scale = ctx.empty(shape);
  host_x.fill(1.0f);
  try {
    lrn_forward(ctx, LrnParams{}, host_x, y, scale);
    ADD_FAILURE() << "accepted a host tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::kernels
