// Optimizer updates on CUDA: every rule and both versions against the CPU path (LeNet's eight
// parameters, and 37 awkward ones, an empty one among them, more than one launch holds), with and
// without clipping and averaging; bit-identical repeats; the update captured in a CUDA graph and
// replayed; the dispatch's device check.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "kernels/optimizers/optimizers.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/optimizer_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::HostParam;

std::vector<HostParam> to_device(Context& ctx, const std::vector<HostParam>& host) {
  std::vector<HostParam> dev;
  for (const HostParam& p : host) {
    HostParam d = p;
    d.w = testing::to_device(ctx, p.w);
    d.g = testing::to_device(ctx, p.g);
    for (size_t j = 0; j < p.state.size(); ++j) {
      if (p.state[j].defined()) d.state[j] = testing::to_device(ctx, p.state[j]);
    }
    dev.push_back(d);
  }
  return dev;
}

void run_cuda(Context& ctx, const OptimizerRule& rule, int64_t step, GradientScaling scaling,
              std::vector<HostParam>& dev, cuda::OptimizerVersion version) {
  const std::vector<OptimizerSlice> slices = testing::host_slices(dev);
  const size_t bytes = cuda::optimizer_workspace_bytes(slices.data(), int(slices.size()), scaling);
  void* workspace = ctx.workspace(bytes / sizeof(float) + 1);
  cuda::optimizer_update(slices.data(), int(slices.size()), rule, step, scaling, workspace, version,
                         ctx.stream());
}

std::vector<int64_t> awkward_sizes() {
  std::vector<int64_t> sizes;
  for (int k = 0; k < 37; ++k) sizes.push_back(k == 7 ? 0 : 1 + 37 * k * k);
  return sizes;
}

TEST(OptimizerCuda, EveryRuleAndVersionMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<int64_t> lenet = {500, 20, 25000, 50, 400000, 500, 5000, 10};
  for (const auto& [name, rule] : testing::rules_under_test()) {
    for (const std::vector<int64_t>& sizes : {lenet, awkward_sizes()}) {
      for (const GradientScaling scaling : {GradientScaling{}, GradientScaling{0.5f, 20.0f}}) {
        Random rng(sizes.size());
        const std::vector<HostParam> host = testing::random_params(rng, rule, sizes);
        std::vector<HostParam> expected;
        for (const HostParam& p : host) expected.push_back(p.clone());
        const std::vector<OptimizerSlice> cpu_slices = testing::host_slices(expected);
        cpu::optimizer_update(cpu_slices.data(), int(cpu_slices.size()), rule, 4, scaling, 2);
        for (cuda::OptimizerVersion version :
             {cuda::OptimizerVersion::per_tensor, cuda::OptimizerVersion::one_launch}) {
          SCOPED_TRACE(name + ", " + std::to_string(sizes.size()) + " parameters, version " +
                       std::to_string(int(version)) + (scaling.max_norm > 0 ? ", clipped" : ""));
          std::vector<HostParam> dev = to_device(ctx, host);
          run_cuda(ctx, rule, 4, scaling, dev, version);
          for (size_t k = 0; k < sizes.size(); ++k) {
            EXPECT_LT(
                testing::rel_error(host_values(ctx, dev[k].w), testing::to_double(expected[k].w)),
                1e-6)
                << "parameter " << k;
            for (size_t j = 0; j < dev[k].state.size(); ++j) {
              if (!dev[k].state[j].defined()) continue;
              EXPECT_LT(testing::rel_error(host_values(ctx, dev[k].state[j]),
                                           testing::to_double(expected[k].state[j])),
                        1e-6)
                  << "parameter " << k << ", slot " << j;
            }
            EXPECT_EQ(host_values(ctx, dev[k].g), std::vector<float>(size_t(sizes[k]), 0.0f)) << k;
          }
        }
      }
    }
  }
}

// The same inputs twice give the same bits; the update captured in a graph and replayed gives
// them too (nothing in it waits for the host or allocates).
TEST(OptimizerCuda, DeterministicAndCapturable) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const OptimizerRule rule = testing::make_rule(OptimizerType::adam);
  const GradientScaling scaling{0.25f, 10.0f};
  Random rng(23);
  const std::vector<HostParam> host = testing::random_params(rng, rule, awkward_sizes());
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 3; ++run) {
    std::vector<HostParam> dev = to_device(ctx, host);
    std::vector<OptimizerTensorSet> sets;
    for (HostParam& p : dev) {
      sets.push_back({&p.w, &p.g, {&p.state[0], &p.state[1]}, p.lr, p.weight_decay});
    }
    if (run < 2) {
      optimizer_update(ctx, rule, 2, sets, scaling);
    } else {  // the workspace has its size from run 0: the capture allocates nothing
      gpu::begin_capture(ctx.stream());
      optimizer_update(ctx, rule, 2, sets, scaling);
      const gpu::Graph graph = gpu::end_capture(ctx.stream());
      gpu::launch(graph, ctx.stream());
      ctx.synchronize();
      gpu::destroy_graph(graph);
    }
    for (size_t k = 0; k < dev.size(); ++k) {
      const std::vector<float> w = host_values(ctx, dev[k].w);
      if (run == 0) {
        first.push_back(w);
      } else {
        EXPECT_TRUE(testing::same_bits(first[k], w)) << "run " << run << ", parameter " << k;
      }
    }
  }
}

TEST(OptimizerCuda, RejectsHostTensors) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor w = ctx.empty({5}), g = ctx.empty({5}), v({5});
  EXPECT_THROW(optimizer_update(ctx, testing::make_rule(OptimizerType::sgd, 0.9), 1,
                                {{&w, &g, {&v}, 0.1f, 0.0f}}),
               Error);
}

}  // namespace
}  // namespace crema::kernels
