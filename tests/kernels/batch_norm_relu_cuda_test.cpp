// The fused batch norm + ReLU (+ residual) on the GPU: the same bits as the unfused chain on the
// GPU in every case of batch_norm_relu_cases() and their nhwc forms (the statistics and sums are
// the split_channel kernels' own, and rows_tiled's in nhwc), the same bits on every run, and close
// to the CPU's fused results (the GPU's variance comes from sum x^2, the CPU's from squared
// deviations: batch_norm_cuda.cu).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/kernels/batch_norm_relu_test_util.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

std::vector<BatchNormReluCase> all_cases() {
  std::vector<BatchNormReluCase> cases = batch_norm_relu_cases();
  for (const BatchNormReluCase& k : batch_norm_relu_nhwc_cases()) cases.push_back(k);
  return cases;
}

std::vector<float> floats(const std::vector<uint32_t>& b) {
  std::vector<float> v(b.size());
  std::memcpy(v.data(), b.data(), b.size() * sizeof(float));
  return v;
}

TEST(BatchNormReluCuda, SameBitsAsTheUnfusedChain) {
  CREMA_REQUIRE_CUDA();
  for (const BatchNormReluCase& k : all_cases()) {
    SCOPED_TRACE(k.name());
    Context ctx(Device::cuda(0));
    const Outputs fused = run_batch_norm_relu(k, true, ctx, 11);
    const Outputs chain = run_batch_norm_relu(k, false, ctx, 11);
    ASSERT_EQ(fused.size(), chain.size());
    for (const auto& [name, values] : chain) EXPECT_EQ(fused.at(name), values) << name;
  }
}

TEST(BatchNormReluCuda, Deterministic) {
  CREMA_REQUIRE_CUDA();
  BatchNormReluCase k{{8, 16, 57, 59}};
  Context ctx(Device::cuda(0));
  EXPECT_EQ(run_batch_norm_relu(k, true, ctx, 3), run_batch_norm_relu(k, true, ctx, 3));
  k.layout = Layout::nhwc;
  EXPECT_EQ(run_batch_norm_relu(k, true, ctx, 3), run_batch_norm_relu(k, true, ctx, 3));
}

// Against the CPU: 1e-5 relative for every output (a value of z within rounding of 0 may take
// the other side of the ReLU on the other device; the inputs keep such values rare).
TEST(BatchNormReluCuda, CloseToTheCpu) {
  CREMA_REQUIRE_CUDA();
  for (const BatchNormReluCase& k : all_cases()) {
    SCOPED_TRACE(k.name());
    Context gpu(Device::cuda(0)), cpu;
    const Outputs got = run_batch_norm_relu(k, true, gpu, 7);
    const Outputs want = run_batch_norm_relu(k, true, cpu, 7);
    for (const auto& [name, values] : want) {
      EXPECT_LE(relative_error(floats(got.at(name)), floats(values)), 1e-5) << name;
    }
  }
}

}  // namespace
}  // namespace crema::testing
