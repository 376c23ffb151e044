// Per-channel scale/bias and channel sums on the CPU: the reference by hand, the fast path
// against ref<double> on awkward shapes with poisoned outputs, accumulate vs write, in-place
// forward, thread-count independence, and the Tensor-level errors.
#include "kernels/scale/scale.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/scale_test_util.h"

namespace crema::kernels::scale_test {
namespace {

using testing::kNaN;

// The last two: channels last (inner = 1) with a partial block of 16 channels, one thread and
// several.
const Case kCases[] = {{1, 1, 1},   {2, 3, 5},  {1, 7, 1},    {5, 1, 33},
                       {4, 16, 49}, {3, 20, 1}, {2000, 41, 1}};

TEST(Scale, ReferenceByHand) {
  // x [1, 2, 2]: channel 0 = {1, 2}, channel 1 = {3, 4}; scale {2, -1}, bias {0.5, 1}.
  const std::vector<float> x = {1, 2, 3, 4}, s = {2, -1}, b = {0.5f, 1}, dy = {1, 1, 2, -1};
  std::vector<float> y(4), out = {10, 20};
  ref::scale_forward<float>(1, 2, 2, x.data(), s.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{2.5f, 4.5f, -2, -3}));
  ref::scale_forward<float>(1, 2, 2, x.data(), nullptr, b.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{1.5f, 2.5f, 4, 5}));
  ref::channel_reduce<float>(1, 2, 2, dy.data(), x.data(), true, out.data());
  EXPECT_EQ(out, (std::vector<float>{10 + 3, 20 + 2}));  // 1*1 + 1*2, 2*3 - 1*4
  ref::channel_reduce<float>(1, 2, 2, dy.data(), nullptr, false, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, 1}));
}

TEST(Scale, CpuMatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(str(c));
    const int64_t n = c.outer * c.C * c.inner;
    const auto [x, dy, s, b, xd, dyd, sd, bd] =
        random_inputs(c, uint64_t(c.outer * 100 + c.C * 10 + c.inner));
    std::vector<double> want(static_cast<size_t>(n)), sums(size_t(c.C));
    ref::scale_forward(c.outer, c.C, c.inner, xd.data(), sd.data(), bd.data(), want.data());
    Tensor y = testing::poisoned({n});
    cpu::scale_forward(c.outer, c.C, c.inner, x.data<float>(), s.data<float>(), b.data<float>(),
                       y.data<float>(), 2);
    EXPECT_LT(testing::rel_error(y.to_vector(), want), 1e-6);
    // In place: y overwrites x.
    Tensor inplace = x.clone();
    cpu::scale_forward(c.outer, c.C, c.inner, inplace.data<float>(), s.data<float>(),
                       b.data<float>(), inplace.data<float>(), 2);
    EXPECT_EQ(inplace.to_vector(), y.to_vector());

    for (const float* xp : {x.data<float>(), static_cast<const float*>(nullptr)}) {
      SCOPED_TRACE(xp ? "sum of dy * x" : "sum of dy");
      ref::channel_reduce(c.outer, c.C, c.inner, dyd.data(), xp ? xd.data() : nullptr, false,
                          sums.data());
      Tensor out = testing::poisoned({c.C});
      cpu::channel_reduce(c.outer, c.C, c.inner, dy.data<float>(), xp, false, out.data<float>(), 2);
      EXPECT_LT(testing::rel_error(out.to_vector(), sums), 1e-6);
      // Accumulating onto s: s + sums; the same bits with one thread as with two.
      Tensor acc1 = s.clone(), acc2 = s.clone();
      cpu::channel_reduce(c.outer, c.C, c.inner, dy.data<float>(), xp, true, acc1.data<float>(), 1);
      cpu::channel_reduce(c.outer, c.C, c.inner, dy.data<float>(), xp, true, acc2.data<float>(), 2);
      std::vector<double> want_acc(size_t(c.C));
      for (size_t k = 0; k < want_acc.size(); ++k) want_acc[k] = sd[k] + sums[k];
      EXPECT_LT(testing::rel_error(acc1.to_vector(), want_acc), 1e-6);
      const std::vector<float> v1 = acc1.to_vector(), v2 = acc2.to_vector();
      EXPECT_EQ(std::memcmp(v1.data(), v2.data(), v1.size() * sizeof(float)), 0);
    }
  }
}

TEST(Scale, TensorLevelAxes) {
  Context ctx;
  Random rng(5);
  // x [2, 3, 4, 5] with channels over axes [0, 2) (a [2, 3] scale) and over axis 2 alone.
  const Tensor x = testing::random_tensor(rng, {2, 3, 4, 5});
  const std::vector<double> xd = testing::to_double(x);
  for (const auto& [axis, num_axes, outer, C, inner] :
       {std::tuple<int, int, int64_t, int64_t, int64_t>{0, 2, 1, 6, 20},
        std::tuple<int, int, int64_t, int64_t, int64_t>{2, 1, 6, 4, 5},
        std::tuple<int, int, int64_t, int64_t, int64_t>{1, 0, 2, 1, 60}}) {
    SCOPED_TRACE("axis " + std::to_string(axis) + " num_axes " + std::to_string(num_axes));
    const Tensor s = testing::random_tensor(rng, {C});
    const std::vector<double> sd = testing::to_double(s);
    std::vector<double> want(size_t(x.numel()));
    ref::scale_forward<double>(outer, C, inner, xd.data(), sd.data(), nullptr, want.data());
    Tensor y = testing::poisoned(x.shape());
    scale_forward(ctx, x, &s, nullptr, axis, num_axes, y);
    EXPECT_LT(testing::rel_error(y.to_vector(), want), 1e-6);
  }
}

TEST(Scale, Errors) {
  Context ctx;
  Tensor x({2, 3, 4}), y({2, 3, 4}), s({4}), out({3});
  x.fill(1.0f);
  s.fill(1.0f);
  try {
    scale_forward(ctx, x, &s, nullptr, 1, 1, y);
    ADD_FAILURE() << "a 4-element scale for 3 channels accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
  }
  EXPECT_THROW(scale_forward(ctx, x, nullptr, &s, 2, 2, y), Error);  // axes past the end
  Tensor wrong({2, 4, 3});
  EXPECT_THROW(channel_reduce(ctx, x, &wrong, 1, 1, false, out), Error);
}

}  // namespace
}  // namespace crema::kernels::scale_test
