// N-d convolution on the GPU: every pass of the Tensor-level calls (rank 1 and 2 through the 2-D
// algorithms, rank 3 through vol2col + GEMM) against the double reference on the awkward
// geometries of convolution_nd_test_util.h, outputs poisoned with NaN, dw and db pre-filled
// (they accumulate); a batch large enough to run in several chunks against the CPU; and
// bit-identical repeats.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "tests/kernels/convolution_cuda_test_util.h"
#include "tests/kernels/convolution_nd_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

struct NdProblem {
  std::vector<float> x, w, bias, dy, dw0, db0;
};

NdProblem random_problem(const ConvNdGeometry& g, uint64_t seed) {
  Random rng(seed);
  return {random_values(rng, g.N * g.C * g.in_volume()),
          random_values(rng, g.K * (g.C / g.groups) * g.kernel_volume()),
          random_values(rng, g.K),
          random_values(rng, g.N * g.K * g.out_volume()),
          random_values(rng, g.K * (g.C / g.groups) * g.kernel_volume()),
          random_values(rng, g.K)};
}

std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// The four results of one context's passes, as host floats (y, dx, dw, db).
std::vector<std::vector<float>> run_passes(Context& ctx, const ConvNdGeometry& g,
                                           const NdProblem& p) {
  auto put = [&](const Shape& shape, const std::vector<float>& host) {
    Tensor t = ctx.empty(shape);
    t.copy_from(Tensor::from_vector(shape, host));
    return t;
  };
  const Tensor x = put(g.x_shape(), p.x), w = put(g.w_shape(), p.w), bias = put({g.K}, p.bias);
  const Tensor dy = put(g.y_shape(), p.dy);
  Tensor y = ctx.empty(g.y_shape()), dx = ctx.empty(g.x_shape());
  Tensor dw = put(g.w_shape(), p.dw0), db = put({g.K}, p.db0);
  ctx.fill(y, kNaN);
  ctx.fill(dx, kNaN);
  conv_nd_forward(ctx, g, x, w, &bias, y);
  conv_nd_backward_data(ctx, g, dy, w, dx);
  conv_nd_backward_weights(ctx, g, x, dy, &dw, &db);
  ctx.synchronize();
  return {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
}

TEST(ConvolutionNdCuda, AwkwardGeometriesAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 1;
  for (const ConvNdGeometry& g : nd_geometries()) {
    SCOPED_TRACE(describe(g));
    const NdProblem p = random_problem(g, seed += 16);
    const std::vector<double> x = widen(p.x), w = widen(p.w), dy = widen(p.dy);
    std::vector<double> y(dy.size()), dx(x.size()), dw = widen(p.dw0), db = widen(p.db0);
    const std::vector<double> bias = widen(p.bias);
    ref::conv_nd_forward(g, x.data(), w.data(), bias.data(), y.data());
    ref::conv_nd_backward_data(g, dy.data(), w.data(), dx.data());
    ref::conv_nd_backward_filter(g, x.data(), dy.data(), dw.data());
    ref::channel_bias_gradient(g.N, g.K, g.out_volume(), dy.data(), db.data());
    const std::vector<std::vector<float>> out = run_passes(ctx, g, p);
    const std::vector<double>* expected[4] = {&y, &dx, &dw, &db};
    const char* names[4] = {"forward", "backward data", "backward filter", "backward bias"};
    for (int i = 0; i < 4; ++i) {
      const Tensor got = Tensor::from_vector({int64_t(out[i].size())}, out[i]);
      expect_close(got, *expected[i], names[i]);
    }
  }
}

// A C3D-sized layer whose batch runs in several chunks of the workspace (col of one image is
// 64*27 x 8*28*28 floats: 6 images a chunk), against the CPU path; then the same call again
// gives the same bits.
TEST(ConvolutionNdCuda, ChunkedBatchAgainstCpuAndRepeatable) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu(Device::cpu(), 1, 2);
  const ConvNdGeometry g{3, 9, 64, 32, {8, 28, 28}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1};
  // The whole batch would need (CTRS + Kg) * N * O floats: the workspace holds fewer images.
  const size_t per_image = size_t((64 * 27 + 32) * g.out_volume());
  ASSERT_LT(cuda::conv_nd_workspace(g), per_image * size_t(g.N));
  const NdProblem p = random_problem(g, 77);
  const std::vector<std::vector<float>> on_gpu = run_passes(gpu, g, p);
  const std::vector<std::vector<float>> on_cpu = run_passes(cpu, g, p);
  const char* names[4] = {"forward", "backward data", "backward filter", "backward bias"};
  for (int i = 0; i < 4; ++i) {
    const Tensor got = Tensor::from_vector({int64_t(on_gpu[i].size())}, on_gpu[i]);
    expect_close(got, widen(on_cpu[i]), names[i]);
  }
  const std::vector<std::vector<float>> again = run_passes(gpu, g, p);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(again[i].data(), on_gpu[i].data(), on_gpu[i].size() * sizeof(float)), 0)
        << names[i] << ": repeat differs";
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
