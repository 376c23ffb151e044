// ReLU: the reference by hand (leaky and plain, the x = 0 kink), the CPU path against
// ref<double> with poisoned outputs, in-place use (y aliases x, dx aliases dy) and the errors.
#include "kernels/activations/relu.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

TEST(ReluRef, ByHand) {
  const std::vector<double> x = {-2, -0.5, 0, 0.5, 3};
  std::vector<double> y(5);
  ref::relu_forward<double>(5, x.data(), y.data(), 0.0);
  EXPECT_EQ(y, (std::vector<double>{0, 0, 0, 0.5, 3}));
  ref::relu_forward<double>(5, x.data(), y.data(), 0.25);
  EXPECT_EQ(y, (std::vector<double>{-0.5, -0.125, 0, 0.5, 3}));
  // The derivative at 0 is the slope; y = 0 there.
  const std::vector<double> dy = {1, 2, 3, 4, 5};
  std::vector<double> dx(5);
  ref::relu_backward<double>(5, y.data(), dy.data(), dx.data(), 0.25);
  EXPECT_EQ(dx, (std::vector<double>{0.25, 0.5, 0.75, 4, 5}));
}

TEST(ReluCpu, MatchesReference) {
  for (int64_t n : {1, 7, 1000, 100003}) {  // 100003 takes the threaded path
    for (float slope : {0.0f, 0.1f}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " slope=" + std::to_string(slope));
      Context ctx(Device::cpu(), 1, 2);
      Random rng(static_cast<uint64_t>(n));
      const Tensor x = testing::random_tensor(rng, {n});
      const Tensor dy = testing::random_tensor(rng, {n});
      Tensor y = testing::poisoned({n}), dx = testing::poisoned({n});
      relu_forward(ctx, x, y, slope);
      relu_backward(ctx, y, dy, dx, slope);
      const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
      std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
      ref::relu_forward<double>(n, xd.data(), y_ref.data(), slope);
      ref::relu_backward<double>(n, y_ref.data(), dyd.data(), dx_ref.data(), slope);
      EXPECT_LT(testing::rel_error(y.to_vector(), y_ref), 1e-6);
      EXPECT_LT(testing::rel_error(dx.to_vector(), dx_ref), 1e-6);
    }
  }
}

TEST(ReluCpu, InPlace) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(3);
  for (int64_t n : {37, 70001}) {
    const Tensor x = testing::random_tensor(rng, {3, n});
    const Tensor dy = testing::random_tensor(rng, {3, n});
    Tensor y({3, n}), dx({3, n});
    relu_forward(ctx, x, y, 0.05f);
    relu_backward(ctx, y, dy, dx, 0.05f);

    Tensor inplace = x.clone();
    relu_forward(ctx, inplace, inplace, 0.05f);
    EXPECT_EQ(inplace.to_vector(), y.to_vector());
    Tensor grad = dy.clone();
    relu_backward(ctx, inplace, grad, grad, 0.05f);
    EXPECT_EQ(grad.to_vector(), dx.to_vector());
  }
}

TEST(Relu, RejectsMismatchesAndANegativeSlopeBackward) {
  Context ctx;
  Tensor x({2, 3}), y({3, 2}), y64({2, 3}, DType::f64);
  x.fill(1.0f);
  EXPECT_THROW(relu_forward(ctx, x, y, 0.0f), Error);
  EXPECT_THROW(relu_forward(ctx, x, y64, 0.0f), Error);
  Tensor same({2, 3});
  EXPECT_THROW(relu_backward(ctx, x, x, same, -0.1f), Error);
  EXPECT_THROW(relu_backward(ctx, x, y, same, 0.0f), Error);
}

}  // namespace
}  // namespace crema::kernels
