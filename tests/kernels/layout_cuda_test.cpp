// Layout transforms on CUDA: every batched-transpose version and the general permutation against
// ref<double> (exactly: these are copies) and the CPU path on awkward shapes with poisoned
// outputs, every 4-D order through the dispatch, NCHW <-> NHWC, and the device checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/layout/layout.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

const cuda::TransposeVersion kVersions[] = {cuda::TransposeVersion::naive,
                                            cuda::TransposeVersion::tiled};

std::vector<double> ref_permute(const Tensor& x, const std::vector<int>& order) {
  const std::vector<double> xd = testing::to_double(x);
  std::vector<double> y(xd.size());
  ref::permute(x.ndim(), x.shape().data(), order.data(), xd.data(), y.data());
  return y;
}

std::string str(const std::vector<int>& order) {
  std::string s;
  for (int a : order) s += std::to_string(a) + " ";
  return s;
}

TEST(LayoutCuda, EveryTransposeVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape cases[] = {{1, 1, 1},   {1, 1, 7},   {1, 7, 1},   {3, 2, 784},   {2, 33, 65},
                         {1, 64, 64}, {5, 31, 33}, {2, 100, 3}, {64, 20, 576}, {1, 3, 50000}};
  Random rng(1);
  for (const Shape& s : cases) {
    const Tensor x = testing::random_tensor(rng, s);
    const std::vector<double> xd = testing::to_double(x);
    std::vector<double> want(xd.size());
    ref::batched_transpose(s[0], s[1], s[2], xd.data(), want.data());
    const Tensor xg = testing::to_device(ctx, x);
    for (cuda::TransposeVersion version : kVersions) {
      SCOPED_TRACE(shape_str(s) + " version " + std::to_string(int(version)));
      Tensor y = testing::poisoned_device(ctx, {s[0], s[2], s[1]});
      cuda::batched_transpose(s[0], s[1], s[2], xg.data<float>(), y.data<float>(), version,
                              ctx.stream());
      EXPECT_EQ(testing::rel_error(host_values(ctx, y), want), 0.0);
    }
  }
}

TEST(LayoutCuda, GeneralPermuteMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(2);
  for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{1, 4, 1, 3}, Shape{3, 2, 4, 2, 3}}) {
    const Tensor x = testing::random_tensor(rng, s);
    const Tensor xg = testing::to_device(ctx, x);
    std::vector<int> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    do {
      SCOPED_TRACE(shape_str(s) + " order " + str(order));
      Tensor y = testing::poisoned_device(ctx, permuted_shape(s, order));
      cuda::permute(int(s.size()), s.data(), order.data(), xg.data<float>(), y.data<float>(),
                    ctx.stream());
      EXPECT_EQ(testing::rel_error(host_values(ctx, y), ref_permute(x, order)), 0.0);
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(LayoutCuda, DispatchEveryOrderAndNchwNhwc) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(3);
  for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{3, 1, 4, 2}, Shape{64, 20, 24, 24}}) {
    const Tensor x = testing::random_tensor(rng, s);
    const Tensor xg = testing::to_device(ctx, x);
    std::vector<int> order = {0, 1, 2, 3};
    do {
      SCOPED_TRACE(shape_str(s) + " order " + str(order));
      Tensor y = testing::poisoned_device(ctx, permuted_shape(s, order));
      permute(ctx, xg, order, y);
      const std::vector<float> first = host_values(ctx, y);
      EXPECT_EQ(testing::rel_error(first, ref_permute(x, order)), 0.0);
      ctx.fill(y, testing::kNaN);
      permute(ctx, xg, order, y);
      EXPECT_TRUE(testing::same_bits(host_values(ctx, y), first));
    } while (std::next_permutation(order.begin(), order.end()));
    Tensor nhwc = testing::poisoned_device(ctx, {s[0], s[2], s[3], s[1]});
    nchw_to_nhwc(ctx, xg, nhwc);
    EXPECT_EQ(testing::rel_error(host_values(ctx, nhwc), ref_permute(x, {0, 2, 3, 1})), 0.0);
    Tensor back = testing::poisoned_device(ctx, s);
    nhwc_to_nchw(ctx, nhwc, back);
    EXPECT_TRUE(testing::same_bits(host_values(ctx, back), x.to_vector()));
  }
}

TEST(LayoutCuda, DispatchChecksDevices) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor host({2, 3});
  host.fill(1.0f);
  Tensor y = ctx.empty({3, 2});
  EXPECT_THROW(permute(ctx, host, {1, 0}, y), Error);
}

}  // namespace
}  // namespace crema::kernels
