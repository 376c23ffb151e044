// bf16 and f16 where they do not run: the CPU has no bf16 / f16 path for the memory-bound ops
// (only cast converts), and the dispatch's message says what exists; eltwise_max refuses more
// inputs than its argmax dtype can index.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/elementwise/eltwise.h"
#include "kernels/pooling/pooling.h"
#include "tests/kernels/pooling_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using crema::testing::error_of;

// (relu_forward's message: tests/kernels/dispatch_test.cpp.)
TEST(HalfDispatch, CpuCallsNameWhatExists) {
  Context cpu;
  const Tensor a({4}, DType::f16), b({4}, DType::f16);
  Tensor sum({4}, DType::f16);
  EXPECT_CONTAINS(error_of([&] {
                    eltwise_sum(cpu, {&a, &b}, {1.0f, 1.0f}, sum);
                  }),
                  "eltwise_sum: no implementation for f16 nchw on cpu (implemented: f32 nchw on "
                  "cuda, bf16 nchw on cuda, f16 nchw on cuda, f32 nchw on cpu, f64 nchw on cpu)");
}

TEST(HalfDispatch, PoolingArgmaxIsF32BesideBf16) {
  Context cpu;
  const Pool2dGeometry g = testing::geometry(1, 1, 4, 4, 2, 2, 0, false);
  const Tensor x({1, 1, 4, 4}, DType::bf16);
  Tensor y({1, 1, 2, 2}, DType::bf16), bf16_argmax({1, 1, 2, 2}, DType::bf16),
      argmax({1, 1, 2, 2}, DType::f32);
  EXPECT_CONTAINS(error_of([&] { pool2d_forward(cpu, g, PoolMode::max, x, y, &bf16_argmax); }),
                  "pool2d_forward: argmax is bf16[1, 1, 2, 2] on cpu, expected f32[1, 1, 2, 2]");
  EXPECT_CONTAINS(error_of([&] { pool2d_forward(cpu, g, PoolMode::max, x, y, &argmax); }),
                  "pool2d_forward: no implementation for bf16 nchw on cpu");
}

TEST(HalfDispatch, EltwiseMaxIndicesBeyondWhatBf16Holds) {
  Context cpu;
  std::vector<Tensor> inputs(257, Tensor({2}, DType::bf16));
  std::vector<const Tensor*> x;
  for (const Tensor& t : inputs) x.push_back(&t);
  Tensor y({2}, DType::bf16), argmax({2}, DType::bf16);
  EXPECT_CONTAINS(error_of([&] { eltwise_max(cpu, x, y, argmax); }),
                  "eltwise_max: 257 inputs, but a bf16 argmax holds input indices exactly only "
                  "up to 256");
}

}  // namespace
}  // namespace crema::kernels
