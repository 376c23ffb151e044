// Unscaling gradients on CUDA against the CPU path: 37 awkward gradients (an empty one among them,
// more than one launch holds) and LeNet's eight, finite (bit-identical values, no flag) and with
// inf, -inf or NaN in several places (the flag set, the rest unscaled alike); the pass captured in
// a CUDA graph and replayed; host tensors refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/optimizers/grad_unscale.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::host_values;

std::vector<int64_t> awkward_sizes() {
  std::vector<int64_t> sizes;
  for (int k = 0; k < 37; ++k) sizes.push_back(k == 7 ? 0 : 1 + 37 * k * k);
  return sizes;
}

std::vector<Tensor> random_host(const std::vector<int64_t>& sizes, uint64_t seed) {
  Random rng(seed);
  std::vector<Tensor> grads;
  for (int64_t n : sizes) grads.push_back(testing::random_tensor(rng, {n}, -100.0, 100.0));
  return grads;
}

// The CPU path's values and flag.
float on_cpu(std::vector<Tensor>& grads, float inv_scale) {
  std::vector<GradientSlice> slices;
  for (Tensor& g : grads) slices.push_back({g.data<float>(), g.numel()});
  return cpu::unscale_gradients(slices.data(), int(slices.size()), inv_scale, 2) ? 1.0f : 0.0f;
}

float on_gpu(Context& ctx, std::vector<Tensor>& dev, float inv_scale) {
  Tensor flag = testing::to_device(ctx, Shape{}, {0.0f});
  std::vector<Tensor*> grads;
  for (Tensor& g : dev) grads.push_back(&g);
  unscale_gradients(ctx, grads, inv_scale, flag);
  return host_values(ctx, flag)[0];
}

void expect_same(Context& ctx, const std::vector<Tensor>& dev, const std::vector<Tensor>& host) {
  for (size_t k = 0; k < dev.size(); ++k) {
    const std::vector<float> got = host_values(ctx, dev[k]), want = host[k].to_vector();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "gradient " << k << ", element " << i;
      } else {
        EXPECT_EQ(got[i], want[i]) << "gradient " << k << ", element " << i;
      }
    }
  }
}

TEST(UnscaleGradientsCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<int64_t> lenet = {500, 20, 25000, 50, 400000, 500, 5000, 10};
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<int64_t>& sizes : {lenet, awkward_sizes()}) {
    // none, then one bad value at the start, inside, at the very end of the list
    for (const float bad : {0.0f, inf, -inf, testing::kNaN}) {
      for (int where = 0; where < (bad == 0.0f ? 1 : 3); ++where) {
        SCOPED_TRACE(std::to_string(sizes.size()) + " gradients, " + std::to_string(bad) +
                     " at place " + std::to_string(where));
        std::vector<Tensor> host = random_host(sizes, sizes.size());
        if (bad != 0.0f) {
          const size_t k = where == 0 ? 0 : where == 1 ? sizes.size() / 2 : sizes.size() - 1;
          const int64_t i = where == 0 ? 0 : host[k].numel() - 1 - where;
          host[k].data<float>()[i] = bad;
        }
        std::vector<Tensor> dev;
        for (const Tensor& g : host) dev.push_back(testing::to_device(ctx, g));
        const float expected = on_cpu(host, 1.0f / 32768.0f);
        EXPECT_EQ(on_gpu(ctx, dev, 1.0f / 32768.0f), expected);
        EXPECT_EQ(expected, bad == 0.0f ? 0.0f : 1.0f);
        expect_same(ctx, dev, host);
      }
    }
  }
}

// Nothing in the pass waits for the host or allocates: captured and replayed, it gives the same
// values and flag.
TEST(UnscaleGradientsCuda, Capturable) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  std::vector<Tensor> host = random_host(awkward_sizes(), 5);
  host[20].data<float>()[17] = std::numeric_limits<float>::infinity();
  std::vector<Tensor> dev;
  for (const Tensor& g : host) dev.push_back(testing::to_device(ctx, g));
  std::vector<Tensor*> grads;
  for (Tensor& g : dev) grads.push_back(&g);
  Tensor flag = testing::to_device(ctx, Shape{}, {0.0f});
  gpu::begin_capture(ctx.stream());
  unscale_gradients(ctx, grads, 0.5f, flag);
  const gpu::Graph graph = gpu::end_capture(ctx.stream());
  gpu::launch(graph, ctx.stream());
  ctx.synchronize();
  gpu::destroy_graph(graph);
  EXPECT_EQ(on_cpu(host, 0.5f), 1.0f);
  EXPECT_EQ(host_values(ctx, flag)[0], 1.0f);
  expect_same(ctx, dev, host);
}

TEST(UnscaleGradientsCuda, RejectsHostTensors) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor g = Tensor::from_vector({2}, {1.0f, 2.0f});
  Tensor flag = testing::to_device(ctx, Shape{}, {0.0f});
  EXPECT_CONTAINS(crema::testing::error_of([&] { unscale_gradients(ctx, {&g}, 1.0f, flag); }),
                  "unscale_gradients: gradient 0");
}

}  // namespace
}  // namespace crema::kernels
