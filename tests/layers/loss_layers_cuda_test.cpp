// SoftmaxWithLoss and Accuracy layers on CUDA against the same layers on the CPU: the loss, the
// bottom gradient (the loss weight read from the top's gradient on the device), the accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"
#include "layers/register_layers.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema {
namespace {

struct LayerRun {
  std::vector<float> top, bottom_grad;
};

// Builds the layer from YAML on ctx, fills its bottoms from host values, runs forward and, with
// loss_weight != 0, backward with the top's gradient set to loss_weight (as the Net does).
LayerRun run_layer(Context& ctx, const std::string& yaml, const std::vector<Shape>& shapes,
                   const std::vector<std::vector<float>>& values, float loss_weight) {
  const ConfigNode node = parse_config(yaml, "test");
  LayerSpec spec;
  spec.name = node.get<std::string>("name");
  spec.type = node.get<std::string>("type");
  spec.node = &node;
  std::vector<std::unique_ptr<Blob>> storage;
  std::vector<Blob*> bottom, top;
  for (size_t i = 0; i < shapes.size(); ++i) {
    storage.push_back(std::make_unique<Blob>());
    Blob& b = *storage.back();
    b.name = "bottom" + std::to_string(i);
    b.value = ctx.empty(shapes[i]);
    b.value.copy_from(Tensor::from_vector(shapes[i], values[i]));
    b.grad = ctx.empty(shapes[i]);
    ctx.fill(b.grad, kernels::testing::kNaN);
    bottom.push_back(&b);
    spec.bottoms.push_back(b.name);
  }
  storage.push_back(std::make_unique<Blob>());
  Blob& t = *storage.back();
  t.name = "top";
  t.value = ctx.empty({0});
  t.grad = ctx.empty({0});
  top.push_back(&t);
  spec.tops.push_back(t.name);
  std::unique_ptr<Layer> layer = builtin_layers().create(spec);
  layer->setup(bottom, top, ctx);
  layer->reshape(bottom, top, ctx);
  t.grad.reshape(t.value.shape());
  layer->forward(bottom, top, ctx);
  LayerRun run;
  ctx.synchronize();
  run.top = t.value.to_vector();
  if (loss_weight != 0.0f) {
    ctx.fill(t.grad, loss_weight);
    std::vector<bool> down(shapes.size(), false);
    down[0] = true;
    layer->backward(top, down, bottom, ctx);
    ctx.synchronize();
    run.bottom_grad = bottom[0]->grad.to_vector();
  }
  return run;
}

TEST(SoftmaxWithLossLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  struct Case {
    std::string yaml;
    Shape logits, labels;
  };
  const std::vector<Case> cases = {
      {"{name: l, type: SoftmaxWithLoss}", {64, 10}, {64}},
      {"{name: l, type: SoftmaxWithLoss, ignore_label: 255, normalization: batch_size}",
       {2, 3, 5, 7},
       {2, 1, 5, 7}},
      {"{name: l, type: SoftmaxWithLoss, ignore_label: 255, normalization: valid}",
       {2, 3, 5, 7},
       {2, 1, 5, 7}},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    Random rng(++seed);
    const std::vector<float> x = kernels::testing::random_values(rng, shape_numel(c.logits), -3, 3);
    const bool ignores = c.yaml.find("ignore_label") != std::string::npos;
    std::vector<float> labels(size_t(shape_numel(c.labels)));
    for (float& l : labels) {
      l = ignores && rng.below(4) == 0 ? 255.0f : float(rng.below(uint64_t(c.logits[1])));
    }
    const LayerRun want = run_layer(cpu, c.yaml, {c.logits, c.labels}, {x, labels}, 0.5f);
    const LayerRun got = run_layer(gpu, c.yaml, {c.logits, c.labels}, {x, labels}, 0.5f);
    ASSERT_EQ(got.top.size(), 1u);
    EXPECT_NEAR(got.top[0], want.top[0], 1e-5 * std::max(1.0f, std::abs(want.top[0])));
    EXPECT_LT(
        kernels::testing::rel_error(got.bottom_grad, kernels::testing::to_double(want.bottom_grad)),
        1e-5);
  }
}

TEST(AccuracyLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  Random rng(3);
  std::vector<float> scores(100 * 10);
  for (float& s : scores) s = float(rng.below(5));
  std::vector<float> labels(100);
  for (float& l : labels) l = float(rng.below(10));
  for (const std::string yaml :
       {"{name: a, type: Accuracy}", "{name: a, type: Accuracy, top_k: 3}"}) {
    const LayerRun want = run_layer(cpu, yaml, {{100, 10}, {100}}, {scores, labels}, 0.0f);
    const LayerRun got = run_layer(gpu, yaml, {{100, 10}, {100}}, {scores, labels}, 0.0f);
    EXPECT_EQ(got.top, want.top) << yaml;
  }
}

// Soft targets (mixup's), a second bottom of the logits' shape: the thread walk ([64, 10]), the
// warp walk ([5, 100]), a spatial loss with label smoothing; then Accuracy scoring their largest
// class. Targets in [0, 1), not summing to 1 (the general gradient).
TEST(SoftmaxWithLossLayerCuda, SoftTargetsMatchCpu) {
  CREMA_REQUIRE_CUDA();
  testing::ParityOptions options;
  options.propagate_down = {true, false};
  options.bottom_values = [](size_t bottom, size_t count) {
    Random rng(bottom + 7);
    return kernels::testing::random_values(rng, int64_t(count), bottom == 0 ? -4 : 0,
                                           bottom == 0 ? 4 : 1);
  };
  testing::check_cuda_parity("{name: l, type: SoftmaxWithLoss}", {{64, 10}, {64, 10}}, options);
  testing::check_cuda_parity("{name: l, type: SoftmaxWithLoss, normalization: batch_size}",
                             {{5, 100}, {5, 100}}, options);
  testing::check_cuda_parity("{name: l, type: SoftmaxWithLoss, label_smoothing: 0.1}",
                             {{2, 3, 5, 7}, {2, 3, 5, 7}}, options);
  options.run_backward = false;
  testing::check_cuda_parity("{name: a, type: Accuracy}", {{33, 10}, {33, 10}}, options);
}

}  // namespace
}  // namespace crema
