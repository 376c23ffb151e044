// The activation layers on CUDA against the same layers on the CPU (tests/support/layer_parity.h):
// tops, bottom gradients and PReLU's slope gradient, on awkward shapes and LeNet's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

// Odd extents, N = 1, a 2-D [N, C] blob (after InnerProduct), LeNet's ip1 output at batch 64 and
// its conv1 output, and a large enough tensor for many blocks.
const std::vector<Shape> kShapes = {
    {1, 3, 5, 7}, {3, 7}, {64, 500}, {64, 20, 24, 24}, {2, 5, 4099}};

// Inputs in [-4, 4): the saturating ends of sigmoid, tanh and GELU are exercised too.
ParityOptions wide_inputs() {
  ParityOptions options;
  options.bottom_values = [](size_t, size_t count) { return random_values(count, -4, 4, 31); };
  return options;
}

void check_all_shapes(const std::string& yaml) {
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(yaml + " on " + shape_str(shape));
    check_cuda_parity(yaml, {shape}, wide_inputs());
  }
}

TEST(ReLULayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: r, type: ReLU}");
}

TEST(ReLULayerCuda, MatchesCpuLeaky) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: r, type: ReLU, negative_slope: 0.1}");
}

TEST(PReLULayerCuda, MatchesCpuPerChannel) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: p, type: PReLU, filler: {type: uniform, min: -0.3, max: 0.6}}");
}

TEST(PReLULayerCuda, MatchesCpuShared) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: p, type: PReLU, channel_shared: true}");
}

TEST(ELULayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: e, type: ELU}");
  check_all_shapes("{name: e, type: ELU, alpha: 0.3}");
}

TEST(SigmoidLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: s, type: Sigmoid}");
}

TEST(TanHLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: t, type: TanH}");
}

TEST(ClipLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: c, type: Clip, min: -0.5, max: 0.75}");
  check_all_shapes("{name: c, type: Clip, min: 0, max: 6}");
}

TEST(SwishLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: s, type: Swish}");
  check_all_shapes("{name: s, type: Swish, beta: 1.7}");
}

TEST(SiLULayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: s, type: SiLU}");
}

TEST(GELULayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: g, type: GELU}");
}

TEST(GELULayerCuda, MatchesCpuTanhApproximation) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: g, type: GELU, approximate: tanh}");
}

TEST(HardsigmoidLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: h, type: Hardsigmoid}");
}

TEST(HardswishLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: h, type: Hardswish}");
}

TEST(MishLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: m, type: Mish}");
}

TEST(SoftsignLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  check_all_shapes("{name: s, type: Softsign}");
}

// In place on the GPU (top == bottom; the layers that need x copy it aside on the stream) against
// out of place on the CPU.
TEST(ActivationLayersCuda, InPlaceMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  const Shape shape = {3, 4, 33};
  const size_t n = size_t(shape_numel(shape));
  const std::vector<float> x = random_values(n, -3, 3, 41), dy = random_values(n, -1, 1, 42);
  for (const char* yaml :
       {"{name: a, type: ELU}", "{name: a, type: Clip, min: -1, max: 2}",
        "{name: a, type: Swish, beta: 0.7}", "{name: a, type: GELU}", "{name: a, type: Hardswish}",
        "{name: a, type: Mish}", "{name: a, type: Softsign}",
        "{name: a, type: PReLU, filler: {type: uniform, min: -1, max: 1}}"}) {
    SCOPED_TRACE(yaml);
    Context cpu, gpu(Device::cuda(0));
    LayerHarness c(yaml, {shape}, cpu), g(yaml, {shape}, gpu);
    for (size_t i = 0; i < c.layer->params().size(); ++i) {
      g.layer->params()[i].value.copy_from(c.layer->params()[i].value);
      c.layer->params()[i].grad.fill(0.0f);
      gpu.fill(g.layer->params()[i].grad, 0.0f);
    }
    c.set_bottom(0, x);
    c.forward();
    c.top[0]->grad.copy_from(Tensor::from_vector(shape, dy));
    c.layer->backward(c.top, {true}, c.bottom, cpu);

    std::vector<Blob*> same = {g.bottom[0]};
    g.set_bottom(0, x);
    g.layer->reshape(same, same, gpu);
    g.layer->forward(same, same, gpu);
    gpu.synchronize();
    const std::vector<float> y = g.bottom[0]->value.to_vector();
    g.bottom[0]->grad.copy_from(Tensor::from_vector(shape, dy));
    g.layer->backward(same, {true}, same, gpu);
    gpu.synchronize();
    using kernels::testing::rel_error;
    using kernels::testing::to_double;
    EXPECT_LT(rel_error(y, to_double(c.top[0]->value)), 1e-5);
    EXPECT_LT(rel_error(g.bottom[0]->grad.to_vector(), to_double(c.bottom[0]->grad)), 1e-5);
    for (size_t i = 0; i < c.layer->params().size(); ++i) {
      EXPECT_LT(
          rel_error(g.layer->params()[i].grad.to_vector(), to_double(c.layer->params()[i].grad)),
          1e-5);
    }
  }
}

}  // namespace
}  // namespace crema::testing
