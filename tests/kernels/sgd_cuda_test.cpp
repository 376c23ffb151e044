// SGD with momentum on CUDA: the single update against ref<double>, both multi-tensor versions
// against the CPU's multi-tensor update on LeNet's eight parameters and on more sets than one
// launch takes (with an empty one), the Tensor-level dispatch, and bit-identical repeats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/sgd/sgd.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

TEST(SgdMomentumCuda, MatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int64_t n : {1, 13, 1000, 100003}) {
    Random rng(static_cast<uint64_t>(n));
    const Tensor w0 = testing::random_tensor(rng, {n}), v0 = testing::random_tensor(rng, {n});
    const Tensor g = testing::random_tensor(rng, {n});
    std::vector<double> w_ref = testing::to_double(w0), v_ref = testing::to_double(v0);
    ref::sgd_momentum_update(n, w_ref.data(), testing::to_double(g).data(), v_ref.data(),
                             double(0.05f), double(0.9f), double(0.0005f));
    Tensor w = testing::to_device(ctx, w0), v = testing::to_device(ctx, v0);
    sgd_momentum_update(ctx, w, testing::to_device(ctx, g), v, 0.05f, 0.9f, 0.0005f);
    EXPECT_LT(testing::rel_error(host_values(ctx, w), w_ref), 1e-6) << n;
    EXPECT_LT(testing::rel_error(host_values(ctx, v), v_ref), 1e-6) << n;
  }
}

// Parameter sets on the host and their device copies.
struct Params {
  std::vector<Tensor> w, g, v;
};

Params random_params(Random& rng, const std::vector<int64_t>& sizes) {
  Params p;
  for (int64_t n : sizes) {
    p.w.push_back(testing::random_tensor(rng, {n}));
    p.g.push_back(testing::random_tensor(rng, {n}));
    p.v.push_back(testing::random_tensor(rng, {n}));
  }
  return p;
}

Params to_device(Context& ctx, const Params& host) {
  Params d;
  for (size_t k = 0; k < host.w.size(); ++k) {
    d.w.push_back(testing::to_device(ctx, host.w[k]));
    d.g.push_back(testing::to_device(ctx, host.g[k]));
    d.v.push_back(testing::to_device(ctx, host.v[k]));
  }
  return d;
}

std::vector<SgdSlice> slices(Params& p) {
  std::vector<SgdSlice> s;
  for (size_t k = 0; k < p.w.size(); ++k) {
    s.push_back({p.w[k].data<float>(), p.g[k].data<float>(), p.v[k].data<float>(), p.w[k].numel(),
                 0.01f * float(k % 5 + 1), k % 3 == 0 ? 0.0f : 0.0005f});
  }
  return s;
}

TEST(SgdMomentumCuda, MultiMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // LeNet's parameters (conv1, conv2, ip1, ip2: weight and bias), then 21 sets (two launches of
  // one_launch, the second partial) with an empty one among them.
  std::vector<int64_t> many;
  for (int k = 0; k < 21; ++k) many.push_back(k == 7 ? 0 : 1 + 37 * k * k);
  for (const std::vector<int64_t>& sizes :
       {std::vector<int64_t>{500, 20, 25000, 50, 400000, 500, 5000, 10}, many}) {
    Random rng(sizes.size());
    Params host = random_params(rng, sizes);
    Params expected = {host.w, host.g, host.v};
    for (size_t k = 0; k < sizes.size(); ++k) {
      expected.w[k] = host.w[k].clone();
      expected.g[k] = host.g[k].clone();  // the update consumes (zeroes) it
      expected.v[k] = host.v[k].clone();
    }
    const std::vector<SgdSlice> cpu_slices = slices(expected);
    cpu::sgd_momentum_update_multi(cpu_slices.data(), int(cpu_slices.size()), 0.9f, 1);
    for (cuda::SgdVersion version : {cuda::SgdVersion::per_tensor, cuda::SgdVersion::one_launch}) {
      SCOPED_TRACE(std::to_string(sizes.size()) + " sets, version " + std::to_string(int(version)));
      Params dev = to_device(ctx, host);
      const std::vector<SgdSlice> dev_slices = slices(dev);
      cuda::sgd_momentum_update_multi(dev_slices.data(), int(dev_slices.size()), 0.9f, version,
                                      ctx.stream());
      for (size_t k = 0; k < sizes.size(); ++k) {
        EXPECT_LT(testing::rel_error(host_values(ctx, dev.w[k]), testing::to_double(expected.w[k])),
                  1e-6)
            << "set " << k;
        EXPECT_LT(testing::rel_error(host_values(ctx, dev.v[k]), testing::to_double(expected.v[k])),
                  1e-6)
            << "set " << k;
        EXPECT_EQ(host_values(ctx, dev.g[k]), std::vector<float>(size_t(sizes[k]), 0.0f)) << k;
      }
    }
  }
}

TEST(SgdMomentumCuda, MultiDispatchIsDeterministicAndEqualsSingleUpdates) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(17);
  const std::vector<int64_t> sizes = {500, 20, 25000, 50};
  const Params host = random_params(rng, sizes);
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 2; ++run) {
    Params dev = to_device(ctx, host);
    std::vector<SgdTensorSet> sets;
    for (size_t k = 0; k < sizes.size(); ++k) {
      sets.push_back({&dev.w[k], &dev.g[k], &dev.v[k], 0.02f, 0.001f});
    }
    sgd_momentum_update_multi(ctx, sets, 0.9f);
    for (size_t k = 0; k < sizes.size(); ++k) {
      const std::vector<float> w = host_values(ctx, dev.w[k]);
      if (run == 0) {
        first.push_back(w);
        // The same update one tensor at a time.
        Tensor w1 = testing::to_device(ctx, host.w[k]), v1 = testing::to_device(ctx, host.v[k]);
        const Tensor g1 = testing::to_device(ctx, host.g[k]);  // dev.g[k] was consumed
        sgd_momentum_update(ctx, w1, g1, v1, 0.02f, 0.9f, 0.001f);
        EXPECT_TRUE(testing::same_bits(host_values(ctx, w1), w)) << k;
      } else {
        EXPECT_TRUE(testing::same_bits(first[k], w)) << k;
      }
    }
  }
  Tensor host_v({500});
  Params dev = to_device(ctx, host);
  EXPECT_THROW(sgd_momentum_update_multi(ctx, {{&dev.w[0], &dev.g[0], &host_v, 0.1f, 0.0f}}, 0.9f),
               Error);
}

}  // namespace
}  // namespace crema::kernels
