// Pointwise losses on CUDA: against ref<double> on sizes that take one block, several blocks and
// the block cap (a finishing block), every normalization, the ignore_label with the backward's
// target count, poisoned outputs, bit-identical repeats, one-sided Euclidean gradients, and the
// dispatch (device checks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/loss/loss.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/loss_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;
using namespace loss_testing;

// One element; one block (up to 256); several; beyond 1024 blocks of 256 (threads loop).
const std::vector<Shape> kShapes = {{1, 1}, {1, 256}, {3, 87}, {64, 10}, {7, 1001}, {5, 70001}};

struct SigmoidRun {
  std::vector<float> loss, dx;
};

SigmoidRun run_sigmoid(Context& ctx, const Shape& shape, const Tensor& x, const Tensor& t,
                       const Tensor& top_grad, const SigmoidCrossEntropyOptions& options) {
  const int64_t n = shape_numel(shape);
  Tensor workspace = ctx.empty({int64_t(cuda::pointwise_loss_workspace_bytes(n) / 4) + 1});
  Tensor loss = testing::poisoned_device(ctx, {}), dx = testing::poisoned_device(ctx, shape);
  cuda::sigmoid_cross_entropy_forward(shape[0], n / shape[0], x.data<float>(), t.data<float>(),
                                      options, loss.data<float>(), workspace.data<float>(),
                                      ctx.stream());
  cuda::sigmoid_cross_entropy_backward(shape[0], n / shape[0], x.data<float>(), t.data<float>(),
                                       top_grad.data<float>(), options, dx.data<float>(),
                                       workspace.data<float>(), ctx.stream());
  return {host_values(ctx, loss), host_values(ctx, dx)};
}

TEST(SigmoidCrossEntropyCuda, MatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 30;
  for (const Shape& shape : kShapes) {
    const int64_t n = shape_numel(shape), outer = shape[0], inner = n / outer;
    Random rng(++seed);
    const std::vector<float> xv = testing::random_values(rng, n, -8, 8), tv = targets(rng, n);
    const std::vector<double> xd = testing::to_double(xv), td = testing::to_double(tv);
    const Tensor x = testing::to_device(ctx, shape, xv), t = testing::to_device(ctx, shape, tv);
    const Tensor top_grad = testing::to_device(ctx, {1}, {0.5f});
    for (bool ignore : {false, true}) {
      for (LossNormalization mode : kModes) {
        SCOPED_TRACE(shape_str(shape) + (ignore ? " ignore_label" : "") + " normalization " +
                     std::to_string(int(mode)));
        const SigmoidCrossEntropyOptions options = sigmoid_options(ignore, mode);
        const SigmoidExpected want = sigmoid_expected(outer, inner, xd, td, options, 0.5);
        const SigmoidRun r = run_sigmoid(ctx, shape, x, t, top_grad, options);
        EXPECT_NEAR(r.loss[0], want.loss, 1e-5 * std::max(1.0, std::abs(want.loss)));
        EXPECT_LT(testing::rel_error(r.dx, want.dx), 1e-5);
      }
    }
  }
}

TEST(SigmoidCrossEntropyCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape = {5, 70001};
  Random rng(7);
  const int64_t n = shape_numel(shape);
  const Tensor x = testing::to_device(ctx, shape, testing::random_values(rng, n, -8, 8));
  const Tensor t = testing::to_device(ctx, shape, targets(rng, n));
  const Tensor top_grad = testing::to_device(ctx, {1}, {1.0f});
  const SigmoidCrossEntropyOptions options = sigmoid_options(true, LossNormalization::valid);
  const SigmoidRun first = run_sigmoid(ctx, shape, x, t, top_grad, options);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const SigmoidRun again = run_sigmoid(ctx, shape, x, t, top_grad, options);
    EXPECT_TRUE(testing::same_bits(again.loss, first.loss));
    EXPECT_TRUE(testing::same_bits(again.dx, first.dx));
  }
}

TEST(EuclideanLossCuda, MatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 40;
  for (const Shape& shape : kShapes) {
    const int64_t n = shape_numel(shape), outer = shape[0], inner = n / outer;
    Random rng(++seed);
    const std::vector<float> av = testing::random_values(rng, n, -3, 3);
    const std::vector<float> bv = testing::random_values(rng, n, -3, 3);
    const std::vector<double> ad = testing::to_double(av), bd = testing::to_double(bv);
    const Tensor a = testing::to_device(ctx, shape, av), b = testing::to_device(ctx, shape, bv);
    const Tensor top_grad = testing::to_device(ctx, {1}, {-2.0f});
    Tensor workspace = ctx.empty({int64_t(cuda::pointwise_loss_workspace_bytes(n) / 4) + 1});
    const double sum = ref::euclidean_loss_forward(n, ad.data(), bd.data());
    for (LossNormalization mode : kModes) {
      SCOPED_TRACE(shape_str(shape) + " normalization " + std::to_string(int(mode)));
      const double normalizer = double(loss_normalizer(mode, outer, inner, n));
      std::vector<double> da_ref(static_cast<size_t>(n)), db_ref(static_cast<size_t>(n));
      ref::euclidean_loss_backward(n, ad.data(), bd.data(), -2.0 / normalizer, da_ref.data(),
                                   db_ref.data());
      Tensor loss = testing::poisoned_device(ctx, {}), da = testing::poisoned_device(ctx, shape),
             db = testing::poisoned_device(ctx, shape);
      cuda::euclidean_loss_forward(outer, inner, a.data<float>(), b.data<float>(), mode,
                                   loss.data<float>(), workspace.data<float>(), ctx.stream());
      cuda::euclidean_loss_backward(outer, inner, a.data<float>(), b.data<float>(),
                                    top_grad.data<float>(), mode, da.data<float>(),
                                    db.data<float>(), ctx.stream());
      const double want = sum / (2 * normalizer);
      EXPECT_NEAR(host_values(ctx, loss)[0], want, 1e-5 * want);
      EXPECT_LT(testing::rel_error(host_values(ctx, da), da_ref), 1e-5);
      EXPECT_LT(testing::rel_error(host_values(ctx, db), db_ref), 1e-5);
      // One side only (da not wanted): db the same bits.
      Tensor db_only = testing::poisoned_device(ctx, shape);
      cuda::euclidean_loss_backward(outer, inner, a.data<float>(), b.data<float>(),
                                    top_grad.data<float>(), mode, nullptr, db_only.data<float>(),
                                    ctx.stream());
      EXPECT_TRUE(testing::same_bits(host_values(ctx, db_only), host_values(ctx, db)));
    }
  }
}

TEST(EuclideanLossCuda, RepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Shape shape = {5, 70001};
  const int64_t n = shape_numel(shape);
  Random rng(9);
  const Tensor a = testing::to_device(ctx, shape, testing::random_values(rng, n, -3, 3));
  const Tensor b = testing::to_device(ctx, shape, testing::random_values(rng, n, -3, 3));
  std::vector<float> first;
  for (int repeat = 0; repeat < 4; ++repeat) {
    Tensor loss = testing::poisoned_device(ctx, {});
    euclidean_loss_forward(ctx, a, b, loss, LossNormalization::batch_size);
    const std::vector<float> got = host_values(ctx, loss);
    if (repeat == 0) first = got;
    EXPECT_TRUE(testing::same_bits(got, first));
  }
}

TEST(PointwiseLossCuda, DispatchMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  Random rng(11);
  const Shape shape = {16, 33};
  const Tensor x = testing::random_tensor(rng, shape, -5, 5);
  const Tensor t = Tensor::from_vector(shape, testing::random_values(rng, 16 * 33, 0, 1));
  const Tensor top_grad = Tensor::from_vector({}, {1.0f});
  Tensor loss_cpu(Shape{}), dx_cpu(shape);
  sigmoid_cross_entropy_forward(cpu, x, t, loss_cpu, {});
  sigmoid_cross_entropy_backward(cpu, x, t, top_grad, {}, dx_cpu);
  const Tensor xg = testing::to_device(gpu, x), tg = testing::to_device(gpu, t);
  const Tensor top_grad_g = testing::to_device(gpu, top_grad);
  Tensor loss = testing::poisoned_device(gpu, {}), dx = testing::poisoned_device(gpu, shape);
  sigmoid_cross_entropy_forward(gpu, xg, tg, loss, {});
  sigmoid_cross_entropy_backward(gpu, xg, tg, top_grad_g, {}, dx);
  EXPECT_NEAR(host_values(gpu, loss)[0], loss_cpu.to_vector()[0],
              1e-5 * std::abs(loss_cpu.to_vector()[0]));
  EXPECT_LT(testing::rel_error(host_values(gpu, dx), testing::to_double(dx_cpu)), 1e-5);
  // Host tensors given to a GPU context are errors, not crashes.
  Tensor host_loss(Shape{});
  EXPECT_THROW(sigmoid_cross_entropy_forward(gpu, xg, tg, host_loss, {}), Error);
  EXPECT_THROW(euclidean_loss_forward(gpu, xg, t, loss, LossNormalization::full), Error);
}

}  // namespace
}  // namespace crema::kernels
