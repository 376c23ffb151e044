// The one dispatch (kernels/common/dispatch.h) on a GPU: a CUDA context runs the CUDA
// implementation on the context's stream, refuses float64 (no CUDA implementation) and a call that
// only has CPU implementations, and the checks refuse a host tensor before anything runs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/activations/relu.h"
#include "kernels/common/dispatch.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DispatchCuda, RunsTheCudaImplementationOnTheContextStream) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  std::string ran = "none";
  bool same_stream = false;
  dispatch(ctx, "probe", DType::f32, on_cpu(DType::f32, [&] { ran = "cpu f32"; }),
           on_cuda(DType::f32, [&](auto stream) {
             ran = "cuda f32";
             same_stream = stream == ctx.stream();
           }));
  EXPECT_EQ(ran, "cuda f32");
  EXPECT_TRUE(same_stream);
}

TEST(DispatchCuda, RefusesWhatHasNoCudaImplementation) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::string device = ctx.device().str();
  EXPECT_EQ(message_of([&] {
              dispatch(ctx, "probe", DType::f64, on_cuda(DType::f32, [](auto) {}),
                       on_cpu(DType::f64, [] {}));
            }),
            "probe: no implementation for f64 nchw on " + device +
                " (implemented: f32 nchw on cuda, f64 nchw on cpu)");
  EXPECT_EQ(
      message_of([&] { dispatch(ctx, "cpu_only", DType::f32, on_cpu(DType::f32, [] {})); }),
      "cpu_only: no implementation for f32 nchw on " + device + " (implemented: f32 nchw on cpu)");
}

TEST(DispatchCuda, ARealOpRunsOnTheGpuAndRefusesHostTensors) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Tensor x = testing::to_device(ctx, {4}, {-2.0f, -0.5f, 0.0f, 3.0f});
  Tensor y = testing::poisoned_device(ctx, {4});
  relu_forward(ctx, x, y, 0.25f);
  EXPECT_EQ(testing::host_values(ctx, y), (std::vector<float>{-0.5f, -0.125f, 0.0f, 3.0f}));

  const Tensor host_x({4});
  const std::string message = message_of([&] { relu_forward(ctx, host_x, y, 0.25f); });
  EXPECT_EQ(message, "relu_forward: x is f32[4] on cpu, expected f32[4] on " + ctx.device().str());
}

}  // namespace
}  // namespace crema::kernels
