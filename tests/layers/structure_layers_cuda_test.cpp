// The structure layers on CUDA against the same layers on the CPU (tests/support/layer_parity.h):
// tops, bottom gradients and parameter gradients on awkward shapes. Flatten, Reshape and Split
// share storage between bottom and top, which check_cuda_parity's poisoning of the tops would
// poison in the bottoms too, so they are compared by check_shared_parity below.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

const char* kUniform = "{type: uniform, min: -1.5, max: 1.5}";

std::string with_filler(const std::string& head, const std::string& tail = "") {
  return "{" + head + ", filler: " + kUniform + tail + "}";
}

// Tops and bottom gradients of the layer on the GPU and on the CPU, with the same bottoms and top
// gradients; bottom gradients poisoned before backward.
void check_shared_parity(const std::string& yaml, const std::vector<Shape>& shapes,
                         int num_tops = 1) {
  SCOPED_TRACE(yaml);
  Context cpu, gpu(Device::cuda(0));
  LayerHarness c(yaml, shapes, cpu, num_tops), g(yaml, shapes, gpu, num_tops);
  for (size_t b = 0; b < shapes.size(); ++b) {
    const std::vector<float> values = random_values(size_t(shape_numel(shapes[b])), -1, 1, 7 + b);
    c.set_bottom(b, values);
    g.set_bottom(b, values);
  }
  c.forward();
  g.forward();
  gpu.synchronize();
  for (size_t t = 0; t < c.top.size(); ++t) {
    EXPECT_EQ(g.top[t]->value.shape(), c.top[t]->value.shape());
    EXPECT_EQ(relative_error(g.top[t]->value.to_vector(), c.top[t]->value.to_vector()), 0.0);
    const std::vector<float> grad = random_values(size_t(c.top[t]->value.numel()), -1, 1, 50 + t);
    c.top[t]->grad.copy_from(Tensor::from_vector(c.top[t]->value.shape(), grad));
    g.top[t]->grad.copy_from(Tensor::from_vector(g.top[t]->value.shape(), grad));
  }
  for (size_t b = 0; b < shapes.size(); ++b) {
    cpu.fill(c.bottom[b]->grad, NAN);
    gpu.fill(g.bottom[b]->grad, NAN);
  }
  const std::vector<bool> down(shapes.size(), true);
  c.layer->backward(c.top, down, c.bottom, cpu);
  g.layer->backward(g.top, down, g.bottom, gpu);
  gpu.synchronize();
  for (size_t b = 0; b < shapes.size(); ++b) {
    EXPECT_LE(relative_error(g.bottom[b]->grad.to_vector(), c.bottom[b]->grad.to_vector()), 1e-6)
        << "bottom " << b << " gradient";
  }
}

TEST(ConcatLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: c, type: Concat}", {{2, 3, 5, 7}, {2, 1, 5, 7}, {2, 4, 5, 7}});
  check_cuda_parity("{name: c, type: Concat, axis: 0}", {{1, 3, 5}, {2, 3, 5}});
  std::vector<Shape> nine;
  for (int64_t k = 1; k <= 9; ++k) nine.push_back({3, k, 2});
  check_cuda_parity("{name: c, type: Concat, axis: -2}", nine);
}

TEST(SliceLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  ParityOptions three;
  three.num_tops = 3;
  check_cuda_parity("{name: s, type: Slice, slice_point: [1, 4]}", {{3, 6, 5}}, three);
  ParityOptions two;
  two.num_tops = 2;
  check_cuda_parity("{name: s, type: Slice, axis: -1}", {{2, 3, 10}}, two);
}

TEST(EltwiseLayerCuda, MatchesCpuForEachOperation) {
  CREMA_REQUIRE_CUDA();
  const std::vector<Shape> three = {{2, 3, 5, 7}, {2, 3, 5, 7}, {2, 3, 5, 7}};
  check_cuda_parity("{name: e, type: Eltwise}", three);
  check_cuda_parity("{name: e, type: Eltwise, coeff: [0.5, -1, 2]}", three);
  check_cuda_parity("{name: e, type: Eltwise, operation: PROD}", three);
  check_cuda_parity("{name: e, type: Eltwise, operation: MAX}", three);
  const std::vector<Shape> nine(9, Shape{3, 17});
  check_cuda_parity("{name: e, type: Eltwise, coeff: [1, 2, 3, 4, 5, 6, 7, 8, 9]}", nine);
  check_cuda_parity("{name: e, type: Eltwise, operation: PROD}", nine);
  check_cuda_parity("{name: e, type: Eltwise, operation: MAX}", nine);
}

TEST(FlattenLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_shared_parity("{name: f, type: Flatten}", {{2, 3, 5, 7}});
  check_shared_parity("{name: f, type: Flatten, axis: 1, end_axis: 2}", {{2, 3, 5, 7}});
}

TEST(ReshapeLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_shared_parity("{name: r, type: Reshape, shape: [0, -1, 5]}", {{2, 3, 5, 7}});
  check_shared_parity("{name: r, type: Reshape, shape: [-1], axis: 1}", {{3, 4, 5}});
}

TEST(SplitLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_shared_parity("{name: s, type: Split}", {{2, 3, 5, 7}}, 2);
  check_shared_parity("{name: s, type: Split}", {{1001}}, 4);
}

TEST(ScaleLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(with_filler("name: s, type: Scale"), {{2, 3, 5, 7}});
  check_cuda_parity(with_filler("name: s, type: Scale, bias_term: true",
                                std::string(", bias_filler: ") + kUniform),
                    {{2, 3, 5, 7}});
  check_cuda_parity(with_filler("name: s, type: Scale, num_axes: 2"), {{2, 3, 5, 7}});
  // LeNet's conv1 output: 36864 positions per channel, the split reduction.
  check_cuda_parity(with_filler("name: s, type: Scale"), {{64, 20, 24, 24}});
}

TEST(ScaleLayerCuda, MatchesCpuWithSecondBottom) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: s, type: Scale}", {{2, 3, 5, 7}, {3}});
  check_cuda_parity("{name: s, type: Scale, axis: 0}", {{2, 3, 5, 7}, {2, 3}});
  check_cuda_parity("{name: s, type: Scale}", {{2, 3, 5}, {}});
}

// Squeeze-excitation's gate [N, C] over H, W (axis 0): N = 1, odd extents, C not a multiple of 8,
// and MobileNetV3's and EfficientNet's sizes.
TEST(ScaleLayerCuda, MatchesCpuSqueezeExcitationGate) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: se, type: Scale, axis: 0}", {{1, 13, 7, 9}, {1, 13}});
  check_cuda_parity("{name: se, type: Scale, axis: 0}", {{3, 5, 11, 3}, {3, 5}});
  check_cuda_parity("{name: se, type: Scale, axis: 0}", {{8, 72, 28, 28}, {8, 72}});
  check_cuda_parity("{name: se, type: Scale, axis: 0}", {{4, 1152, 7, 7}, {4, 1152}});
}

TEST(LayerScaleLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(with_filler("name: ls, type: LayerScale"), {{1, 13, 7, 9}});
  check_cuda_parity(with_filler("name: ls, type: LayerScale"), {{2, 96, 56, 56}});
  check_cuda_parity(with_filler("name: ls, type: LayerScale"), {{3, 7}});
}

TEST(BiasLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity(with_filler("name: b, type: Bias"), {{2, 3, 5, 7}});
  check_cuda_parity("{name: b, type: Bias}", {{2, 3, 5, 7}, {3}});
  check_cuda_parity("{name: b, type: Bias, axis: 0}", {{2, 3, 5, 7}, {2, 3, 5}});
}

TEST(PermuteLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_cuda_parity("{name: p, type: Permute, order: [0, 2, 3, 1]}", {{2, 3, 5, 7}});
  check_cuda_parity("{name: p, type: Permute, order: [0, 3, 1, 2]}", {{2, 5, 7, 3}});
  check_cuda_parity("{name: p, type: Permute, order: [2, 0, 3, 1]}", {{2, 3, 5, 7}});
  check_cuda_parity("{name: p, type: Permute, order: [0, 2, 3, 1]}", {{64, 20, 24, 24}});
}

}  // namespace
}  // namespace crema::testing
