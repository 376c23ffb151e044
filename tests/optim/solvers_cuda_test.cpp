// The solvers on CUDA: every rule, with averaging over iter_size 2, clipping, lr_mult/decay_mult
// and a frozen parameter, takes the CPU solver's steps on parameters of awkward sizes; its state
// matches; two runs give the same bits.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "optim/solver.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema {
namespace {

using kernels::testing::host_values;
using kernels::testing::rel_error;
using kernels::testing::to_double;

const std::vector<std::string>& rules() {
  static const std::vector<std::string> all = {
      "type: SGD",
      "type: SGD, momentum: 0.9",
      "type: SGD, momentum: 0.9, nesterov: true",
      "type: Adam, beta1: 0.8",
      "type: AdamW",
      "type: RMSProp",
      "type: RMSProp, momentum: 0.5, centered: true",
      "type: AdaGrad, lr_decay: 0.1, initial_accumulator_value: 0.1",
  };
  return all;
}

const std::vector<int64_t> kSizes = {1, 13, 1000, 4099, 100003};

// Parameters of kSizes on `ctx` (the same values on every context), one frozen, the others with
// assorted multipliers.
std::vector<Param> make_params(Context& ctx) {
  std::vector<Param> params(kSizes.size() + 1);
  Random rng(9);
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t n = k < kSizes.size() ? kSizes[k] : 77;
    Param& p = params[k];
    p.name = "p" + std::to_string(k);
    p.value = kernels::testing::to_device(ctx, kernels::testing::random_tensor(rng, {n}));
    p.grad = ctx.zeros({n});
    p.lr_mult = k == kSizes.size() ? 0.0f : float(k % 3 + 1);
    p.decay_mult = k % 2 == 0 ? 1.0f : 0.0f;
  }
  return params;
}

// Two steps of iter_size 2 on params: each step two passes of gradients that accumulate.
void train(Solver& solver, std::vector<Param>& params, Context& ctx) {
  std::vector<Param*> list;
  for (Param& p : params) list.push_back(&p);
  Random rng(21);
  for (int64_t iter = 0; iter < 2; ++iter) {
    for (int pass = 0; pass < 2; ++pass) {
      for (Param& p : params) {
        std::vector<float> sum = host_values(ctx, p.grad);
        const std::vector<float> g = kernels::testing::random_values(rng, p.grad.numel());
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
        p.grad.copy_from(Tensor::from_vector(p.grad.shape(), sum));
      }
    }
    solver.step(list, iter, ctx);
  }
}

TEST(SolverCuda, EveryRuleMatchesCpu) {
  CREMA_REQUIRE_CUDA();
  for (const std::string& rule : rules()) {
    SCOPED_TRACE(rule);
    const std::string yaml =
        "{base_lr: 0.01, weight_decay: 0.01, iter_size: 2, clip_gradients: 30, " + rule + "}";
    Context cpu, gpu(Device::cuda(0));
    auto cpu_solver = make_solver(parse_config(yaml, "s.yaml"), 10);
    auto gpu_solver = make_solver(parse_config(yaml, "s.yaml"), 10);
    std::vector<Param> on_cpu = make_params(cpu), on_gpu = make_params(gpu);
    train(*cpu_solver, on_cpu, cpu);
    train(*gpu_solver, on_gpu, gpu);
    for (size_t k = 0; k < on_cpu.size(); ++k) {
      EXPECT_LT(rel_error(host_values(gpu, on_gpu[k].value), to_double(on_cpu[k].value)), 1e-6)
          << on_cpu[k].name;
    }
    std::vector<Param*> cpu_list, gpu_list;
    for (size_t k = 0; k < on_cpu.size(); ++k) {
      cpu_list.push_back(&on_cpu[k]);
      gpu_list.push_back(&on_gpu[k]);
    }
    const auto cpu_state = cpu_solver->state(cpu_list, cpu);
    const auto gpu_state = gpu_solver->state(gpu_list, gpu);
    ASSERT_EQ(cpu_state.size(), gpu_state.size());
    for (size_t k = 0; k < cpu_state.size(); ++k) {
      EXPECT_EQ(gpu_state[k].first, cpu_state[k].first);
      EXPECT_TRUE(gpu_state[k].second.device().is_cuda());
      EXPECT_LT(rel_error(host_values(gpu, gpu_state[k].second), to_double(cpu_state[k].second)),
                1e-6)
          << cpu_state[k].first;
    }
  }
}

TEST(SolverCuda, RunsAreBitIdentical) {
  CREMA_REQUIRE_CUDA();
  for (const std::string& rule : rules()) {
    SCOPED_TRACE(rule);
    const std::string yaml = "{base_lr: 0.01, iter_size: 2, clip_gradients: 30, " + rule + "}";
    Context gpu(Device::cuda(0));
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 2; ++run) {
      auto solver = make_solver(parse_config(yaml, "s.yaml"), 10);
      std::vector<Param> params = make_params(gpu);
      train(*solver, params, gpu);
      for (size_t k = 0; k < params.size(); ++k) {
        const std::vector<float> w = host_values(gpu, params[k].value);
        if (run == 0) {
          first.push_back(w);
        } else {
          EXPECT_TRUE(kernels::testing::same_bits(first[k], w)) << params[k].name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace crema
