// SGD with momentum: two steps against a hand computation, the equivalence with PyTorch's form
// at a fixed rate (and the difference once the rate changes), the CPU path against ref<double>,
// the multi-tensor update against single updates, and shape errors.
#include "kernels/sgd/sgd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels {
namespace {

TEST(SgdMomentum, TwoStepsByHand) {
  Context ctx;
  Tensor w = Tensor::from_vector({2}, {1.0f, -2.0f});
  Tensor v = Tensor::from_vector({2}, {0.0f, 0.0f});
  const float lr = 0.1f, momentum = 0.9f, decay = 0.01f;
  // Step 1: g' = [0.5 + 0.01, 0.25 - 0.02] = [0.51, 0.23]; v = 0.1 g' = [0.051, 0.023];
  // w = [0.949, -2.023].
  sgd_momentum_update(ctx, w, Tensor::from_vector({2}, {0.5f, 0.25f}), v, lr, momentum, decay);
  EXPECT_NEAR(v.to_vector()[0], 0.051, 1e-7);
  EXPECT_NEAR(v.to_vector()[1], 0.023, 1e-7);
  EXPECT_NEAR(w.to_vector()[0], 0.949, 1e-6);
  EXPECT_NEAR(w.to_vector()[1], -2.023, 1e-6);
  // Step 2: g' = [-0.3 + 0.00949, 0.1 - 0.02023] = [-0.29051, 0.07977];
  // v = 0.9 [0.051, 0.023] + 0.1 g' = [0.016849, 0.028677]; w = [0.932151, -2.051677].
  sgd_momentum_update(ctx, w, Tensor::from_vector({2}, {-0.3f, 0.1f}), v, lr, momentum, decay);
  EXPECT_NEAR(v.to_vector()[0], 0.016849, 1e-7);
  EXPECT_NEAR(v.to_vector()[1], 0.028677, 1e-7);
  EXPECT_NEAR(w.to_vector()[0], 0.932151, 1e-6);
  EXPECT_NEAR(w.to_vector()[1], -2.051677, 1e-6);
}

// PyTorch's form: v = m v + g'; w -= lr v.
void pytorch_step(std::vector<double>& w, const std::vector<double>& g, std::vector<double>& v,
                  double lr, double momentum, double decay) {
  for (size_t i = 0; i < w.size(); ++i) {
    v[i] = momentum * v[i] + g[i] + decay * w[i];
    w[i] -= lr * v[i];
  }
}

TEST(SgdMomentumRef, EqualsPyTorchAtAFixedRateOnly) {
  Random rng(5);
  const int64_t n = 16;
  std::vector<double> w_caffe = testing::to_double(testing::random_values(rng, n));
  std::vector<double> w_torch = w_caffe, v_caffe(size_t(n), 0.0), v_torch(size_t(n), 0.0);
  std::vector<std::vector<double>> grads;
  for (int step = 0; step < 6; ++step) {
    grads.push_back(testing::to_double(testing::random_values(rng, n)));
  }
  for (int step = 0; step < 3; ++step) {
    ref::sgd_momentum_update(n, w_caffe.data(), grads[step].data(), v_caffe.data(), 0.1, 0.9,
                             0.001);
    pytorch_step(w_torch, grads[step], v_torch, 0.1, 0.9, 0.001);
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(w_caffe[i], w_torch[i], 1e-14);
  // A step policy divides the rate by 10: the two forms now take different steps.
  for (int step = 3; step < 6; ++step) {
    ref::sgd_momentum_update(n, w_caffe.data(), grads[step].data(), v_caffe.data(), 0.01, 0.9,
                             0.001);
    pytorch_step(w_torch, grads[step], v_torch, 0.01, 0.9, 0.001);
  }
  double max_gap = 0;
  for (int64_t i = 0; i < n; ++i) max_gap = std::max(max_gap, std::abs(w_caffe[i] - w_torch[i]));
  EXPECT_GT(max_gap, 1e-3);
}

TEST(SgdMomentumCpu, MatchesReference) {
  for (int64_t n : {1, 13, 100003}) {  // 100003 takes the threaded path
    Context ctx(Device::cpu(), 1, 2);
    Random rng(static_cast<uint64_t>(n));
    Tensor w = testing::random_tensor(rng, {n}), v = testing::random_tensor(rng, {n});
    const Tensor g = testing::random_tensor(rng, {n});
    std::vector<double> w_ref = testing::to_double(w), v_ref = testing::to_double(v);
    sgd_momentum_update(ctx, w, g, v, 0.05f, 0.9f, 0.0005f);
    ref::sgd_momentum_update(n, w_ref.data(), testing::to_double(g).data(), v_ref.data(),
                             double(0.05f), double(0.9f), double(0.0005f));
    EXPECT_LT(testing::rel_error(w.to_vector(), w_ref), 1e-6) << n;
    EXPECT_LT(testing::rel_error(v.to_vector(), v_ref), 1e-6) << n;
  }
}

TEST(SgdMomentumMulti, EqualsOneUpdatePerTensor) {
  Context ctx(Device::cpu(), 1, 2);
  Random rng(6);
  const std::vector<int64_t> sizes = {500, 20, 25000, 1, 100003};
  std::vector<Tensor> w, g, v, w_single, g_single, v_single;
  std::vector<SgdTensorSet> sets;
  for (size_t k = 0; k < sizes.size(); ++k) {
    w.push_back(testing::random_tensor(rng, {sizes[k]}));
    g.push_back(testing::random_tensor(rng, {sizes[k]}));
    v.push_back(testing::random_tensor(rng, {sizes[k]}));
    w_single.push_back(w.back().clone());
    g_single.push_back(g.back().clone());
    v_single.push_back(v.back().clone());
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    sets.push_back({&w[k], &g[k], &v[k], 0.01f * float(k + 1), k % 2 == 0 ? 0.0005f : 0.0f});
  }
  sgd_momentum_update_multi(ctx, sets, 0.9f);
  for (size_t k = 0; k < sizes.size(); ++k) {
    sgd_momentum_update(ctx, w_single[k], g_single[k], v_single[k], sets[k].lr, 0.9f,
                        sets[k].weight_decay);
    EXPECT_EQ(w[k].to_vector(), w_single[k].to_vector()) << k;
    EXPECT_EQ(v[k].to_vector(), v_single[k].to_vector()) << k;
    EXPECT_EQ(g[k].to_vector(), std::vector<float>(size_t(sizes[k]), 0.0f)) << k;  // consumed
  }
}

TEST(SgdMomentumMulti, NamesTheSetThatDoesNotFit) {
  Context ctx;
  Tensor w({4}), g({4}), v({4}), v5({5});
  const std::vector<SgdTensorSet> sets = {{&w, &g, &v, 0.1f, 0.0f}, {&w, &g, &v5, 0.1f, 0.0f}};
  try {
    sgd_momentum_update_multi(ctx, sets, 0.9f);
    ADD_FAILURE() << "a history of the wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("v is"), std::string::npos) << e.what();
  }
}

TEST(SgdMomentum, RejectsMismatchedTensors) {
  Context ctx;
  Tensor w({4}), g({4}), v({5}), g2({2, 2});
  EXPECT_THROW(sgd_momentum_update(ctx, w, g, v, 0.1f, 0.9f, 0.0f), Error);
  EXPECT_THROW(sgd_momentum_update(ctx, w, g2, w, 0.1f, 0.9f, 0.0f), Error);
}

}  // namespace
}  // namespace crema::kernels
