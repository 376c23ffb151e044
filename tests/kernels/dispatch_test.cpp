// The one dispatch (kernels/common/dispatch.h) on the CPU: it runs the implementation that serves
// the call's dtype and layout, refuses every other call with one line naming the op, what was asked
// for and what exists, and routes float64 calls of a real op to its double reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/activations/relu.h"
#include "kernels/common/dispatch.h"

namespace crema::kernels {
namespace {

// Which implementation ran: "cpu f32", "cpu f64", "cpu f32 nhwc", "cuda f32" or "none".
std::string route(DType dtype, Layout layout = Layout::nchw) {
  Context ctx;
  std::string ran = "none";
  dispatch(ctx, "probe", dtype, layout, on_cuda(DType::f32, [&](auto) { ran = "cuda f32"; }),
           on_cpu(DType::f32, [&] { ran = "cpu f32"; }),
           on_cpu(DType::f64, [&] { ran = "cpu f64"; }),
           on_cpu(
               DType::f32, [&] { ran = "cpu f32 nhwc"; }, Layout::nhwc));
  return ran;
}

std::string refusal(DType dtype, Layout layout = Layout::nchw) {
  try {
    route(dtype, layout);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Dispatch, RoutesByDtypeAndLayoutOnTheCpu) {
  EXPECT_EQ(route(DType::f32), "cpu f32");
  EXPECT_EQ(route(DType::f64), "cpu f64");
  EXPECT_EQ(route(DType::f32, Layout::nhwc), "cpu f32 nhwc");
}

TEST(Dispatch, RefusesAnUnimplementedDtypeInOneLine) {
  const std::string implemented =
      "(implemented: f32 nchw on cuda, f32 nchw on cpu, f64 nchw on cpu, f32 nhwc on cpu)";
  EXPECT_EQ(refusal(DType::bf16), "probe: no implementation for bf16 nchw on cpu " + implemented);
  EXPECT_EQ(refusal(DType::f16), "probe: no implementation for f16 nchw on cpu " + implemented);
  EXPECT_EQ(refusal(DType::f64, Layout::nhwc),
            "probe: no implementation for f64 nhwc on cpu " + implemented);
}

TEST(Dispatch, RefusesADeviceWithoutAnImplementation) {
  Context ctx;
  bool ran = false;
  try {
    dispatch(ctx, "cuda_only", DType::f32, on_cuda(DType::f32, [&](auto) { ran = true; }));
    FAIL() << "a CUDA-only op ran on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cuda_only: no implementation for f32 nchw on cpu (implemented: f32 nchw on cuda)");
  }
  EXPECT_FALSE(ran);
}

// A real op: float64 tensors take the double reference, bf16 ones are refused by name.
TEST(Dispatch, RoutesARealOpToItsDoubleReference) {
  Context ctx;
  Tensor x({4}, DType::f64), y({4}, DType::f64);
  const std::vector<double> values = {-2.0, -0.5, 0.0, 3.0};
  for (size_t i = 0; i < values.size(); ++i) x.data<double>()[i] = values[i];
  relu_forward(ctx, x, y, 0.25f);
  const std::vector<double> expected = {-0.5, -0.125, 0.0, 3.0};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(y.data<double>()[i], expected[i]);

  Tensor xb({4}, DType::bf16), yb({4}, DType::bf16);
  try {
    relu_forward(ctx, xb, yb, 0.0f);
    FAIL() << "relu_forward ran on bf16";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "relu_forward: no implementation for bf16 nchw on cpu (implemented: f32 nchw on "
              "cuda, bf16 nchw on cuda, f16 nchw on cuda, f32 nchw on cpu, f64 nchw on cpu)");
  }
}

// Every tensor of a call has the dtype of its first input: the checks refuse a mix before dispatch.
TEST(Dispatch, ChecksRefuseMixedDtypes) {
  Context ctx;
  Tensor x({4}, DType::f64), y({4});
  try {
    relu_forward(ctx, x, y, 0.0f);
    FAIL() << "relu_forward ran on f64 x and f32 y";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "relu_forward: y is f32[4] on cpu, expected f64[4] on cpu");
  }
}

}  // namespace
}  // namespace crema::kernels
