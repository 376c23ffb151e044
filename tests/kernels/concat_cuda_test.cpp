// Concat and slice on CUDA: every version against ref<double> (exactly: these are copies) on
// awkward shapes with poisoned outputs, more parts than one launch takes, skipped slice parts,
// and the dispatch with its device checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/concat/concat.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

const cuda::ConcatVersion kVersions[] = {cuda::ConcatVersion::per_part, cuda::ConcatVersion::fused};

struct Case {
  int64_t outer, inner;
  std::vector<int64_t> extents;
};

TEST(ConcatCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Case cases[] = {
      {1, 1, {1}},
      {2, 3, {1, 2}},
      {3, 1, {4, 1, 2}},
      {5, 13, {1, 1, 1, 1}},
      {64, 576, {20, 50}},
      {7, 5, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}},  // 11 parts: two launches when fused
      {1, 100003, {2, 1}},
  };
  Random rng(1);
  for (const Case& c : cases) {
    const int P = int(c.extents.size());
    int64_t K = 0;
    for (int64_t e : c.extents) K += e;
    std::vector<Tensor> host, dev;
    std::vector<std::vector<double>> hd;
    for (int64_t e : c.extents) {
      host.push_back(testing::random_tensor(rng, {c.outer, e, c.inner}));
      hd.push_back(testing::to_double(host.back()));
      dev.push_back(testing::to_device(ctx, host.back()));
    }
    std::vector<const double*> pd;
    std::vector<const float*> pg;
    for (int p = 0; p < P; ++p) {
      pd.push_back(hd[size_t(p)].data());
      pg.push_back(dev[size_t(p)].data<float>());
    }
    std::vector<double> want(size_t(c.outer * K * c.inner));
    ref::concat(c.outer, c.inner, P, c.extents.data(), pd.data(), want.data());
    for (cuda::ConcatVersion version : kVersions) {
      SCOPED_TRACE("outer " + std::to_string(c.outer) + " inner " + std::to_string(c.inner) +
                   " parts " + std::to_string(P) + " version " + std::to_string(int(version)));
      Tensor whole = testing::poisoned_device(ctx, {c.outer, K, c.inner});
      cuda::concat(c.outer, c.inner, P, c.extents.data(), pg.data(), whole.data<float>(), version,
                   ctx.stream());
      EXPECT_EQ(testing::rel_error(host_values(ctx, whole), want), 0.0);
      // Back through slice, the last part skipped (left poisoned).
      std::vector<Tensor> back;
      std::vector<float*> out;
      for (int p = 0; p < P; ++p) {
        back.push_back(testing::poisoned_device(ctx, {c.outer, c.extents[size_t(p)], c.inner}));
        out.push_back(p == P - 1 ? nullptr : back.back().data<float>());
      }
      cuda::slice(c.outer, c.inner, P, c.extents.data(), whole.data<float>(), out.data(), version,
                  ctx.stream());
      for (int p = 0; p + 1 < P; ++p) {
        EXPECT_TRUE(
            testing::same_bits(host_values(ctx, back[size_t(p)]), host[size_t(p)].to_vector()));
      }
      EXPECT_EQ(testing::count_nan(host_values(ctx, back[size_t(P - 1)])),
                back[size_t(P - 1)].numel());
    }
  }
}

TEST(ConcatCuda, DispatchAndDeviceChecks) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(2);
  const Tensor a = testing::random_tensor(rng, {2, 3, 4}),
               b = testing::random_tensor(rng, {2, 3, 1});
  const Tensor ag = testing::to_device(ctx, a), bg = testing::to_device(ctx, b);
  Tensor whole = testing::poisoned_device(ctx, {2, 3, 5});
  concat(ctx, {&ag, &bg}, 2, whole);
  Tensor a2 = testing::poisoned_device(ctx, {2, 3, 4}),
         b2 = testing::poisoned_device(ctx, {2, 3, 1});
  slice(ctx, whole, 2, {4, 1}, {&a2, &b2});
  EXPECT_TRUE(testing::same_bits(host_values(ctx, a2), a.to_vector()));
  EXPECT_TRUE(testing::same_bits(host_values(ctx, b2), b.to_vector()));
  EXPECT_THROW(concat(ctx, {&a, &bg}, 2, whole), Error);  // a is on the host
}

}  // namespace
}  // namespace crema::kernels
