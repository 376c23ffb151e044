#include "optim/solver.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace crema {
namespace {

LrPolicy policy(const std::string& yaml, int64_t total = 1000) {
  return read_lr_policy(parse_config(yaml, "solver.yaml"), total);
}

TEST(LrPolicy, Values) {
  EXPECT_DOUBLE_EQ(policy("{}").rate(0.1, 500), 0.1);
  EXPECT_DOUBLE_EQ(policy("{lr_policy: {type: step, gamma: 0.5, step_size: 10}}").rate(0.1, 25), 0.025);
  EXPECT_DOUBLE_EQ(policy("{lr_policy: {type: multistep, gamma: 0.1, steps: [10, 20]}}").rate(1.0, 20), 0.01);
  EXPECT_DOUBLE_EQ(policy("{lr_policy: {type: exp, gamma: 0.9}}").rate(1.0, 2), 0.81);
  EXPECT_DOUBLE_EQ(policy("{lr_policy: {type: inv, gamma: 0.0001, power: 0.75}}").rate(0.01, 1000),
                   0.01 * std::pow(1.1, -0.75));
  EXPECT_DOUBLE_EQ(policy("{lr_policy: {type: poly, power: 2}}", 100).rate(1.0, 50), 0.25);
  EXPECT_NEAR(policy("{lr_policy: {type: cosine}}", 100).rate(1.0, 50), 0.5, 1e-12);
  EXPECT_NEAR(policy("{lr_policy: {type: cosine, min_lr: 0.1}}", 100).rate(1.0, 100), 0.1, 1e-12);
  const LrPolicy warm = policy("{lr_policy: {type: fixed, warmup_iters: 10, warmup_start: 0.1}}");
  EXPECT_DOUBLE_EQ(warm.rate(1.0, 0), 0.1);
  EXPECT_DOUBLE_EQ(warm.rate(1.0, 5), 0.55);
  EXPECT_DOUBLE_EQ(warm.rate(1.0, 10), 1.0);
}

TEST(LrPolicy, Errors) {
  EXPECT_THROW(policy("{lr_policy: {type: invv}}"), Error);
  EXPECT_THROW(policy("{lr_policy: {type: inv, gamma: 0.1}}"), Error);  // power missing
  EXPECT_THROW(policy("{lr_policy: {type: step, gamma: 0.1, step_size: 0}}"), Error);
  EXPECT_THROW(policy("{lr_policy: {type: fixed, gama: 1}}"), Error);
}

// Two explicit steps of Caffe's SGD: v = m v + lr (g + wd w); w -= v.
TEST(SgdSolver, TwoStepsByHand) {
  Context ctx;
  const ConfigNode node = parse_config("{type: sgd, base_lr: 0.1, momentum: 0.9, weight_decay: 0.01}", "s.yaml");
  auto solver = make_solver(node, 10);
  Param p;
  p.name = "w";
  p.value = Tensor::from_vector({2}, {1.0f, -2.0f});
  p.grad = Tensor::from_vector({2}, {0.5f, 0.25f});
  p.lr_mult = 2.0f;
  p.decay_mult = 0.0f;
  std::vector<Param*> params = {&p};
  solver->step(params, 0, ctx);
  // lr 0.2, no decay: v = 0.2 * g = (0.1, 0.05); w = (0.9, -2.05); grad zeroed
  EXPECT_FLOAT_EQ(p.value.to_vector()[0], 0.9f);
  EXPECT_FLOAT_EQ(p.value.to_vector()[1], -2.05f);
  EXPECT_EQ(p.grad.to_vector(), (std::vector<float>{0, 0}));
  p.grad = Tensor::from_vector({2}, {1.0f, 0.0f});
  solver->step(params, 1, ctx);
  // v = 0.9 * (0.1, 0.05) + 0.2 * (1, 0) = (0.29, 0.045); w = (0.61, -2.095)
  EXPECT_NEAR(p.value.to_vector()[0], 0.61f, 1e-6);
  EXPECT_NEAR(p.value.to_vector()[1], -2.095f, 1e-6);
}

// A rollback after a non-finite step scales base_lr, and so every later rate of the policy.
TEST(SgdSolver, ScaleLearningRateScalesEveryIteration) {
  const ConfigNode node =
      parse_config("{type: sgd, base_lr: 0.1, lr_policy: {type: step, gamma: 0.1, step_size: 5}}",
                   "s.yaml");
  auto solver = make_solver(node, 20);
  const double before[] = {solver->learning_rate(0), solver->learning_rate(7)};
  solver->scale_learning_rate(0.5);
  EXPECT_DOUBLE_EQ(solver->learning_rate(0), 0.5 * before[0]);
  EXPECT_DOUBLE_EQ(solver->learning_rate(7), 0.5 * before[1]);
}

TEST(SgdSolver, Errors) {
  EXPECT_THROW(make_solver(parse_config("{type: adagradd, base_lr: 0.1}", "s.yaml"), 10), Error);
  EXPECT_THROW(make_solver(parse_config("{type: sgd, base_lr: fast}", "s.yaml"), 10), Error);
  EXPECT_THROW(make_solver(parse_config("{type: sgd, base_lr: 0.1, momentum: 1.5}", "s.yaml"), 10), Error);
}

}  // namespace
}  // namespace crema
