// The loss scaler (optim/loss_scale.h): GradScaler's state machine (backoff at an overflow, growth
// after growth_interval finite steps in a row, the count restarted by an overflow, a fixed scale
// that never moves), the unscale of a parameter list on the CPU (frozen ones left alone), the
// solver.loss_scale keys with their defaults by model.precision and their errors, and Adam's step
// counted in applied updates.
#include "optim/loss_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/config.h"
#include "optim/solver.h"
#include "tests/support/error_text.h"

namespace crema {
namespace {

LossScaleConfig dynamic(float init, int64_t interval) {
  LossScaleConfig c;
  c.enabled = true;
  c.init = init;
  c.growth_interval = interval;
  return c;
}

TEST(LossScaler, BacksOffAtAnOverflowAndGrowsAfterTheInterval) {
  LossScaler s(dynamic(65536.0f, 3));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_TRUE(s.update(false));  // overflow: x 0.5, the count restarts
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.state().skipped, 1);
  EXPECT_FALSE(s.update(true));
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.state().good_steps, 2);
  EXPECT_TRUE(s.update(false));  // an overflow before the third: back off again
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.state().good_steps, 0);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(s.update(true));
  EXPECT_TRUE(s.update(true));  // the third finite step in a row: x 2
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.state().good_steps, 0);
  EXPECT_EQ(s.state().skipped, 2);
}

// GradScaler's defaults: 2^16, x 2 after 2000 finite steps, x 0.5 at an overflow.
TEST(LossScaler, TorchDefaults) {
  const LossScaleConfig c =
      read_loss_scale_config(parse_config("{base_lr: 0.1}", "s.yaml"), Precision::fp16);
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.dynamic);
  EXPECT_EQ(c.init, 65536.0f);
  EXPECT_EQ(c.growth_factor, 2.0f);
  EXPECT_EQ(c.backoff_factor, 0.5f);
  EXPECT_EQ(c.growth_interval, 2000);
  LossScaler s(c);
  for (int i = 0; i < 1999; ++i) ASSERT_FALSE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 131072.0f);
}

// Growth that would overflow float is not taken (GradScaler keeps the scale when the grown one
// is not finite); backoff stops at float's smallest normal number, so that 1 / S stays finite.
TEST(LossScaler, StaysWithinFloat) {
  LossScaler high(dynamic(std::ldexp(1.0f, 127), 1));
  EXPECT_FALSE(high.update(true));
  EXPECT_EQ(high.scale(), std::ldexp(1.0f, 127));
  LossScaler low(dynamic(std::ldexp(1.0f, -125), 1));
  EXPECT_TRUE(low.update(false));
  EXPECT_TRUE(low.update(false));
  EXPECT_EQ(low.scale(), std::numeric_limits<float>::min());
}

TEST(LossScaler, AFixedScaleNeverMovesButCountsSkips) {
  const LossScaleConfig c =
      read_loss_scale_config(parse_config("{loss_scale: 1024}", "s.yaml"), Precision::fp32);
  ASSERT_TRUE(c.enabled);
  EXPECT_FALSE(c.dynamic);
  LossScaler s(c);
  EXPECT_FALSE(s.update(false));
  for (int i = 0; i < 5000; ++i) ASSERT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.state().skipped, 1);
}

TEST(LossScaler, DisabledScalesByOne) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    const LossScaleConfig c = read_loss_scale_config(parse_config("{base_lr: 1}", "s.yaml"), p);
    EXPECT_FALSE(c.enabled) << precision_name(p);
    EXPECT_EQ(LossScaler(c).scale(), 1.0f);
  }
  EXPECT_FALSE(
      read_loss_scale_config(parse_config("{loss_scale: false}", "s.yaml"), Precision::fp16)
          .enabled);
  const LossScaleConfig on =
      read_loss_scale_config(parse_config("{loss_scale: true}", "s.yaml"), Precision::bf16);
  EXPECT_TRUE(on.enabled && on.dynamic);
  const LossScaleConfig some = read_loss_scale_config(
      parse_config("{loss_scale: {init: 128, growth_interval: 10}}", "s.yaml"), Precision::fp32);
  EXPECT_TRUE(some.enabled && some.dynamic);
  EXPECT_EQ(some.init, 128.0f);
  EXPECT_EQ(some.growth_interval, 10);
  EXPECT_EQ(some.backoff_factor, 0.5f);
}

TEST(LossScaler, ErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{loss_scale: {init: 0}}", "s.yaml:1:21: solver.loss_scale.init must be a number > 0"},
      {"{loss_scale: {init: 1e39}}",
       "solver.loss_scale.init must be a number > 0 that float holds"},
      {"{loss_scale: -4}", "s.yaml:1:14: solver.loss_scale must be a number > 0"},
      {"{loss_scale: {growth_factor: 1}}", "solver.loss_scale.growth_factor must be > 1"},
      {"{loss_scale: {backoff_factor: 1}}", "solver.loss_scale.backoff_factor must be in (0, 1)"},
      {"{loss_scale: {growth_interval: 0}}", "solver.loss_scale.growth_interval must be >= 1"},
      {"{loss_scale: {inti: 8}}", "unknown key 'inti' in solver.loss_scale (did you mean 'init'?)"},
      {"{loss_scale: often}", "s.yaml:1:14: loss_scale: expected true or false, got 'often'"},
      {"{loss_scale: [1, 2]}", "solver.loss_scale is a map {init, growth_factor, backoff_factor"},
  };
  for (const auto& [text, message] : bad) {
    const std::string yaml = text;  // a lambda may not capture a structured binding (C++17)
    EXPECT_CONTAINS(testing::error_of([&] {
                      read_loss_scale_config(parse_config(yaml, "s.yaml"), Precision::fp16);
                    }),
                    message);
  }
}

// Every gradient not frozen is divided by the scale; one inf anywhere among them is reported; a
// frozen parameter's gradient (which no layer computes) is left as it is.
TEST(LossScaler, UnscalesTheGradientsOfTheParametersNotFrozen) {
  Context ctx;
  Param a, b, frozen;
  a.grad = Tensor::from_vector({2}, {1024.0f, -3.0f});
  b.grad = Tensor::from_vector({1}, {0.5f});
  frozen.grad = Tensor::from_vector({1}, {std::numeric_limits<float>::infinity()});
  frozen.lr_mult = 0.0f;
  std::vector<Param*> params = {&a, &frozen, &b};
  LossScaler s(dynamic(1024.0f, 2000));
  EXPECT_TRUE(s.unscale(params, ctx));
  EXPECT_EQ(a.grad.to_vector(), (std::vector<float>{1.0f, -3.0f / 1024.0f}));
  EXPECT_EQ(b.grad.to_vector(), (std::vector<float>{0.5f / 1024.0f}));
  EXPECT_TRUE(std::isinf(frozen.grad.to_vector()[0]));
  b.grad.data<float>()[0] = std::nanf("");
  EXPECT_FALSE(s.unscale(params, ctx));
  a.grad.data<float>()[0] = 2.0f;
  b.grad.data<float>()[0] = 2.0f;
  EXPECT_TRUE(s.unscale(params, ctx));  // the flag of the last call does not linger
}

// Adam's bias correction counts applied updates (torch.optim's state['step']): the sixth
// iteration (iter 5) after 3 skipped ones is the third update, t = 3, as iter 2 with none.
TEST(LossScaler, SkippedStepsDoNotCountInAdamsStep) {
  Context ctx;
  auto run = [&](int64_t iter, int64_t skipped) {
    auto solver = make_solver(parse_config("{type: adam, base_lr: 0.1}", "s.yaml"), 10);
    Param p;
    p.name = "w";
    p.value = Tensor::from_vector({2}, {1.0f, -2.0f});
    p.grad = Tensor::from_vector({2}, {0.5f, 0.25f});
    std::vector<Param*> params = {&p};
    solver->step(params, iter, ctx, skipped);
    return p.value.to_vector();
  };
  EXPECT_EQ(run(5, 3), run(2, 0));
  EXPECT_NE(run(5, 0), run(2, 0));
}

}  // namespace
}  // namespace crema
