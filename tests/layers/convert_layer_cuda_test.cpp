// The Convert layer on CUDA against the CPU, bit for bit: f32 NCHW images to bf16 and f16 NHWC
// and back (the Net's two boundaries), forward and backward, on a shape whose C and H*W are not
// multiples of the 32 x 32 tiles.
#include <gtest/gtest.h>

#include <string>

#include "kernels/layout/layout.h"
#include "tests/kernels/half_test_util.h"
#include "tests/layers/convert_rig.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

TEST(ConvertLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  const Shape shape{3, 37, 5, 7};
  const auto x = random_values(size_t(shape_numel(shape)), -4, 4, 5);
  const auto dy = random_values(size_t(shape_numel(shape)), -1, 1, 6);
  struct Pair {
    DType from, to;
    Layout from_layout, to_layout;
  };
  for (const Pair& p : {Pair{DType::f32, DType::bf16, Layout::nchw, Layout::nhwc},
                        Pair{DType::f32, DType::f16, Layout::nchw, Layout::nhwc},
                        Pair{DType::bf16, DType::f32, Layout::nhwc, Layout::nchw},
                        Pair{DType::f16, DType::f32, Layout::nhwc, Layout::nchw}}) {
    SCOPED_TRACE(std::string(dtype_name(p.from)) + " -> " + dtype_name(p.to));
    ConvertRig c(cpu, shape, p.from, p.from_layout, p.to, p.to_layout);
    ConvertRig g(gpu, shape, p.from, p.from_layout, p.to, p.to_layout);
    // The same inputs on both: the CPU's rounded values copied to the GPU.
    Tensor xf = Tensor::from_vector(shape, x), dyf = Tensor::from_vector(shape, dy);
    kernels::convert(cpu, xf, c.x.value);
    kernels::convert(cpu, dyf, c.y.grad);
    g.x.value.copy_from(c.x.value);
    g.y.grad.copy_from(c.y.grad);
    c.layer->forward({&c.x}, {&c.y}, cpu);
    g.layer->forward({&g.x}, {&g.y}, gpu);
    c.layer->backward({&c.y}, {true}, {&c.x}, cpu);
    g.layer->backward({&g.y}, {true}, {&g.x}, gpu);
    gpu.synchronize();
    EXPECT_EQ(g.y.value.to_vector(), c.y.value.to_vector());
    EXPECT_EQ(g.x.grad.to_vector(), c.x.grad.to_vector());
  }
}

}  // namespace
}  // namespace crema::testing
