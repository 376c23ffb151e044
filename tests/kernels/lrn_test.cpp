// LRN on the CPU: ref<double> and the fast path against PyTorch's golden values (across channels:
// nn.LocalResponseNorm; within a channel: the same formula from avg_pool2d), the fast path against
// ref<double> on awkward shapes (windows wider than the tensor, N = 1, a single element),
// thread-count independence, and the dispatch's errors.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/lrn/lrn.h"
#include "tests/fixtures/norm_fixture.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/lrn_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;
using testing::lrn_params;
using testing::rel_error;

std::string describe(const LrnParams& p) {
  return std::string(p.region == LrnRegion::across_channels ? "across" : "within") + " size " +
         std::to_string(p.local_size) + " alpha " + std::to_string(p.alpha) + " beta " +
         std::to_string(p.beta) + " k " + std::to_string(p.k);
}

class LrnGolden : public ::testing::TestWithParam<std::string> {
 protected:
  crema::testing::NormFixture f;
  LrnParams params() const {
    const std::vector<double> h = f.doubles(GetParam() + ".hyper");
    LrnParams p;
    p.local_size = int64_t(h[0]);
    p.alpha = float(h[1]);
    p.beta = float(h[2]);
    p.k = float(h[3]);
    p.region = h[4] == 0.0 ? LrnRegion::across_channels : LrnRegion::within_channel;
    return p;
  }
};

TEST_P(LrnGolden, ReferenceMatchesPyTorch) {
  const LrnParams p = params();
  const LrnShape s = testing::lrn_shape(f.shape("lrn.x"));
  const std::vector<double> x = f.doubles("lrn.x"), dy = f.doubles("lrn.dy");
  std::vector<double> y(x.size()), scale(x.size()), dx(x.size());
  ref::lrn_forward(s, p, x.data(), y.data(), scale.data());
  ref::lrn_backward(s, p, x.data(), y.data(), scale.data(), dy.data(), dx.data());
  // alpha, beta and k are float32 here and float64 in torch: about 1e-8 apart.
  const std::vector<float> yf(y.begin(), y.end()), dxf(dx.begin(), dx.end());
  EXPECT_LT(rel_error(yf, f.doubles(GetParam() + ".y")), 1e-6);
  EXPECT_LT(rel_error(dxf, f.doubles(GetParam() + ".dx")), 1e-6);
}

TEST_P(LrnGolden, CpuMatchesPyTorch) {
  Context ctx;
  const LrnParams p = params();
  const Tensor x = f.input("lrn.x"), dy = f.input("lrn.dy");
  Tensor y = testing::poisoned(x.shape()), scale = testing::poisoned(x.shape());
  Tensor dx = testing::poisoned(x.shape());
  lrn_forward(ctx, p, x, y, scale);
  lrn_backward(ctx, p, x, y, scale, dy, dx);
  EXPECT_LT(rel_error(y.to_vector(), f.doubles(GetParam() + ".y")), 1e-5);
  EXPECT_LT(rel_error(dx.to_vector(), f.doubles(GetParam() + ".dx")), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Lrn, LrnGolden,
                         ::testing::Values("lrn_across5", "lrn_across3", "lrn_within3",
                                           "lrn_within5"));

void check_against_reference(const Shape& shape, const LrnParams& p, int threads, uint64_t seed) {
  SCOPED_TRACE(shape_str(shape) + " " + describe(p) + ", " + std::to_string(threads) +
               " thread(s)");
  Context ctx(Device::cpu(), 1, threads);
  Random rng(seed);
  const Tensor x = testing::random_tensor(rng, shape, -2.0, 2.0);
  const Tensor dy = testing::random_tensor(rng, shape);
  Tensor y = testing::poisoned(shape), scale = testing::poisoned(shape);
  Tensor dx = testing::poisoned(shape);
  lrn_forward(ctx, p, x, y, scale);
  lrn_backward(ctx, p, x, y, scale, dy, dx);

  const testing::LrnReference r =
      testing::lrn_reference(shape, p, testing::to_double(x), testing::to_double(dy));
  EXPECT_LT(rel_error(y.to_vector(), r.y), 1e-6);
  EXPECT_LT(rel_error(scale.to_vector(), r.scale), 1e-6);
  EXPECT_LT(rel_error(dx.to_vector(), r.dx), 1e-5);
}

TEST(Lrn, CpuMatchesReferenceOnAwkwardShapes) {
  const LrnRegion across = LrnRegion::across_channels, within = LrnRegion::within_channel;
  std::vector<std::pair<Shape, LrnParams>> cases = testing::lrn_awkward_cases();
  cases.emplace_back(Shape{4, 16, 13, 13}, lrn_params(across, 5, 1e-2f, 0.75f, 2.0f));  // threaded
  cases.emplace_back(Shape{4, 8, 13, 13}, lrn_params(within, 3, 0.5f, 0.75f, 1.0f));
  uint64_t seed = 1;
  for (const auto& [shape, p] : cases) {
    for (const int threads : {1, 2}) check_against_reference(shape, p, threads, seed);
    ++seed;
  }
}

TEST(Lrn, ResultsDoNotDependOnTheThreadCount) {
  const Shape shape{4, 16, 13, 13};
  for (const LrnRegion region : {LrnRegion::across_channels, LrnRegion::within_channel}) {
    const LrnParams p = lrn_params(region, 5, 1.0f, 0.75f, 1.0f);
    std::vector<std::vector<float>> outputs;
    for (const int threads : {1, 2}) {
      Context ctx(Device::cpu(), 1, threads);
      Random rng(3);
      const Tensor x = testing::random_tensor(rng, shape), dy = testing::random_tensor(rng, shape);
      Tensor y(shape), scale(shape), dx(shape);
      lrn_forward(ctx, p, x, y, scale);
      lrn_backward(ctx, p, x, y, scale, dy, dx);
      std::vector<float> all = y.to_vector(), d = dx.to_vector();
      all.insert(all.end(), d.begin(), d.end());
      outputs.push_back(all);
    }
    EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].size() * sizeof(float)),
              0)
        << describe(p);
  }
}

TEST(Lrn, BadArgumentsAreErrors) {
  Context ctx;
  const Shape shape{1, 3, 2, 2};
  Tensor x(shape), y(shape), scale(shape), dy(shape), dx(shape);
  x.fill(1.0f);
  dy.fill(1.0f);
  LrnParams even = lrn_params(LrnRegion::across_channels, 4, 1.0f, 0.75f, 1.0f);
  EXPECT_NE(error_of([&] { lrn_forward(ctx, even, x, y, scale); }).find("local_size 4"),
            std::string::npos);
  const LrnParams p;
  Tensor flat(Shape{3, 4});
  EXPECT_NE(error_of([&] { lrn_forward(ctx, p, flat, flat, flat); }).find("4 axes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { lrn_forward(ctx, p, x, x, scale); }).find("shares storage"),
            std::string::npos);
  lrn_forward(ctx, p, x, y, scale);
  EXPECT_NE(error_of([&] { lrn_backward(ctx, p, x, y, scale, dy, dy); }).find("shares storage"),
            std::string::npos);
}

}  // namespace
}  // namespace crema::kernels
