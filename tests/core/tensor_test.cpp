#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/context.h"
#include "core/error.h"

namespace crema {
namespace {

TEST(Tensor, ShapeAndAccess) {
  Tensor t({2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_EQ(t.description(), "f32[2, 3, 4] on cpu");
}

TEST(Tensor, CopiesShareAndCloneCopies) {
  Tensor a = Tensor::from_vector({2, 2}, {1, 2, 3, 4});
  Tensor b = a;
  Tensor c = a.clone();
  a.data<float>()[0] = 9;
  EXPECT_EQ(b.to_vector()[0], 9);
  EXPECT_EQ(c.to_vector()[0], 1);
  Tensor v = a.view({4});
  EXPECT_TRUE(v.shares_storage(a));
  EXPECT_THROW(a.view({5}), Error);
}

TEST(Tensor, ReshapeKeepsOrReallocates) {
  Tensor t({10});
  Tensor alias = t;
  t.reshape({2, 4});  // 32 bytes of 40: kept
  EXPECT_TRUE(t.shares_storage(alias));
  t.reshape({100});  // larger: new storage
  EXPECT_FALSE(t.shares_storage(alias));
  EXPECT_EQ(t.numel(), 100);
}

TEST(Device, Parse) {
  EXPECT_TRUE(Device::parse("cpu").is_cpu());
  EXPECT_EQ(Device::parse("cuda:3").index, 3);
  EXPECT_EQ(Device::parse("cuda").index, 0);
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
  EXPECT_THROW(Device::parse("cuda:"), Error);
}

TEST(Random, SameSeedSameNumbers) {
  Random a(7), b(7), c(8);
  for (int i = 0; i < 10; ++i) {
    const double x = a.gaussian(0, 1);
    EXPECT_EQ(x, b.gaussian(0, 1));
    (void)c;
  }
  Random d(7);
  EXPECT_NE(d.next(), c.next());
}

TEST(Random, GaussianMoments) {
  Random r(3);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.gaussian(2.0, 0.5);
    sum += x;
    sq += x * x;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 2.0, 0.01);
  EXPECT_NEAR(var, 0.25, 0.01);
}

TEST(Context, Workspace) {
  Context ctx;
  float* w = ctx.workspace(100);
  w[99] = 1.f;
  EXPECT_EQ(ctx.workspace(50), w);
  EXPECT_GT(ctx.num_threads(), 0);
  if (gpu::device_count() == 0) {
    EXPECT_THROW(Context(Device::cuda(0)), Error);
  }
}

}  // namespace
}  // namespace crema
