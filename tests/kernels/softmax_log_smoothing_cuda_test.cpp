// Log-softmax's dispatch against the CPU, and the label-smoothed softmax cross-entropy on CUDA:
// every version against ref<double> on awkward shapes (thread and warp versions, one block and
// several, the backward's separate label count), every normalization, poisoned outputs, in-place
// use (every log-softmax version, bit-identical repeats and invalid labels: softmax_cuda_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/softmax/softmax.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/softmax_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using testing::kNaN;

using namespace softmax_testing;

TEST(LogSoftmaxCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  Random rng(3);
  for (const Case& c : {Case{{64, 10}, 1}, Case{{2, 21, 9, 7}, 1}, Case{{4, 6, 5}, -1}}) {
    SCOPED_TRACE(describe(c));
    const Tensor x = testing::random_tensor(rng, c.shape, -6, 6);
    const Tensor dy = testing::random_tensor(rng, c.shape);
    Tensor y_cpu(c.shape), dx_cpu(c.shape);
    log_softmax_forward(cpu, x, y_cpu, c.axis);
    log_softmax_backward(cpu, y_cpu, dy, dx_cpu, c.axis);
    const Tensor xg = testing::to_device(gpu, x), dyg = testing::to_device(gpu, dy);
    Tensor y = testing::poisoned_device(gpu, c.shape), dx = testing::poisoned_device(gpu, c.shape);
    log_softmax_forward(gpu, xg, y, c.axis);
    log_softmax_backward(gpu, y, dyg, dx, c.axis);
    EXPECT_LT(testing::rel_error(host_values(gpu, y), testing::to_double(y_cpu)), 1e-6);
    EXPECT_LT(testing::rel_error(host_values(gpu, dx), testing::to_double(dx_cpu)), 1e-5);
  }
}

TEST(SoftmaxCrossEntropySmoothingCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  check_loss_every_version(180, 0.2f);
}

}  // namespace
}  // namespace crema::kernels
