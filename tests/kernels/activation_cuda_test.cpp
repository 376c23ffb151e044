// Pointwise activations and PReLU on CUDA: every version against ref<double> on odd sizes with
// poisoned outputs, against PyTorch's golden values, misaligned pointers, in-place use, the
// determinism of PReLU's slope reduction (both versions, run twice), and the device checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/activations/pointwise.h"
#include "kernels/activations/prelu.h"
#include "tests/fixtures/activation_fixture.h"
#include "tests/kernels/activation_test_util.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::activation_test {
namespace {

using K = ActivationKind;
using testing::host_values;

const cuda::PointwiseVersion kPointwiseVersions[] = {cuda::PointwiseVersion::scalar,
                                                     cuda::PointwiseVersion::vectorized};
const cuda::PreluVersion kPreluVersions[] = {cuda::PreluVersion::block_per_channel,
                                             cuda::PreluVersion::split_channel};

TEST(ActivationCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int64_t n : {1, 3, 7, 1000, 32001, 100003}) {
    Random rng{uint64_t(n)};
    const Tensor x = testing::random_tensor(rng, {n}, -5, 5), dy = testing::random_tensor(rng, {n});
    const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
    const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
    for (const Activation& a : all_activations()) {
      std::vector<double> y_ref, dx_ref;
      reference(a, xd, dyd, y_ref, dx_ref);
      std::vector<float> first_y, first_dx;
      for (cuda::PointwiseVersion version : kPointwiseVersions) {
        SCOPED_TRACE(std::string(activation_name(a.kind)) + " n=" + std::to_string(n) +
                     " version " + std::to_string(int(version)));
        Tensor y = testing::poisoned_device(ctx, {n}), dx = testing::poisoned_device(ctx, {n});
        cuda::activation_forward(a, n, xg.data<float>(), y.data<float>(), version, ctx.stream());
        cuda::activation_backward(a, n, from_output(a) ? y.data<float>() : xg.data<float>(),
                                  dyg.data<float>(), dx.data<float>(), version, ctx.stream());
        const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
        crema::testing::expect_activation_close(yv, y_ref, 2e-6);
        crema::testing::expect_activation_close(dxv, dx_ref, 2e-6);
        if (n >= 1000) {
          EXPECT_LT(testing::rel_error(yv, y_ref), 1e-6);
          EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-6);
        }
        if (first_y.empty()) {
          first_y = yv;
          first_dx = dxv;
        } else {  // the versions differ in memory access only
          EXPECT_TRUE(testing::same_bits(yv, first_y));
          EXPECT_TRUE(testing::same_bits(dxv, first_dx));
        }
      }
    }
  }
}

TEST(ActivationCuda, MatchesPyTorch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const auto& c : crema::testing::read_activation_golden()) {
    SCOPED_TRACE(c.name);
    const int64_t n = int64_t(c.x.size());
    const Tensor x = testing::to_device(ctx, {n}, c.x), dy = testing::to_device(ctx, {n}, c.dy);
    Tensor y = testing::poisoned_device(ctx, {n}), dx = testing::poisoned_device(ctx, {n});
    activation_forward(ctx, c.activation, x, y);
    activation_backward(ctx, c.activation, from_output(c.activation) ? y : x, dy, dx);
    const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
    EXPECT_LT(testing::rel_error(yv, c.y), 1e-5);
    EXPECT_LT(testing::rel_error(dxv, c.dx), 1e-5);
    crema::testing::expect_activation_close(yv, c.y, 1e-5);
    crema::testing::expect_activation_close(dxv, c.dx, 1e-5);
  }
}

TEST(ActivationCuda, MisalignedPointersAndInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  const int64_t n = 1031;
  Random rng(3);
  const Tensor x = testing::random_tensor(rng, {n}, -3, 3), dy = testing::random_tensor(rng, {n});
  const std::vector<double> xd = testing::to_double(x);
  for (const Activation& a : all_activations()) {
    SCOPED_TRACE(activation_name(a.kind));
    // One float past a 16-byte boundary: the vectorized version falls back to scalar.
    std::vector<double> y_ref(static_cast<size_t>(n - 1));
    ref::activation_forward(a, n - 1, xd.data() + 1, y_ref.data());
    const Tensor xg = testing::to_device(ctx, x);
    Tensor y = testing::poisoned_device(ctx, {n});
    cuda::activation_forward(a, n - 1, xg.data<float>() + 1, y.data<float>() + 1,
                             cuda::PointwiseVersion::vectorized, ctx.stream());
    std::vector<float> yv = host_values(ctx, y);
    EXPECT_TRUE(std::isnan(yv[0]));  // not written
    yv.erase(yv.begin());
    crema::testing::expect_activation_close(yv, y_ref, 2e-6);

    // In place through the dispatch: y over x, dx over dy, the same bits as out of place.
    Tensor y_out = ctx.empty({n}), dx_out = ctx.empty({n});
    const Tensor dyg = testing::to_device(ctx, dy);
    activation_forward(ctx, a, xg, y_out);
    activation_backward(ctx, a, from_output(a) ? y_out : xg, dyg, dx_out);
    Tensor t = testing::to_device(ctx, x), g = testing::to_device(ctx, dy);
    activation_forward(ctx, a, t, t);
    activation_backward(ctx, a, from_output(a) ? t : xg, g, g);
    EXPECT_TRUE(testing::same_bits(host_values(ctx, t), host_values(ctx, y_out)));
    EXPECT_TRUE(testing::same_bits(host_values(ctx, g), host_values(ctx, dx_out)));
  }
  Tensor host_y(x.shape());
  const Tensor xg = testing::to_device(ctx, x);
  try {
    activation_forward(ctx, {K::tanh}, xg, host_y);
    ADD_FAILURE() << "a host output was accepted on a CUDA context";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("on cuda:0"), std::string::npos) << e.what();
  }
}

// --- PReLU --------------------------------------------------------------------------------------

struct PreluCase {
  int64_t N, C, D;
};

// N = 1; D = 1 (after InnerProduct); LeNet-like conv outputs; a shared slope over a large tensor
// (C = 1: the split version's 64 slices); C = 700 channels of one element each.
const std::vector<PreluCase> kPreluCases = {{1, 3, 7},    {64, 500, 1},   {64, 20, 576},
                                            {2, 5, 4099}, {1, 1, 300007}, {3, 700, 1}};

TEST(PreluCuda, EveryVersionMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const PreluCase& s : kPreluCases) {
    const int64_t n = s.N * s.C * s.D;
    Random rng{uint64_t(n + s.C)};
    const std::vector<float> x = testing::random_values(rng, n),
                             dy = testing::random_values(rng, n);
    const std::vector<float> slope = testing::random_values(rng, s.C, -0.5, 0.5);
    const std::vector<float> dslope0 = testing::random_values(rng, s.C);
    const auto xd = testing::to_double(x), dyd = testing::to_double(dy);
    const auto sd = testing::to_double(slope);
    std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
    std::vector<double> dslope_ref = testing::to_double(dslope0);
    ref::prelu_forward(s.N, s.C, s.D, xd.data(), sd.data(), y_ref.data());
    ref::prelu_backward_data(s.N, s.C, s.D, xd.data(), sd.data(), dyd.data(), dx_ref.data());
    ref::prelu_backward_slope(s.N, s.C, s.D, xd.data(), dyd.data(), dslope_ref.data());

    const Tensor xg = testing::to_device(ctx, {n}, x), dyg = testing::to_device(ctx, {n}, dy);
    const Tensor sg = testing::to_device(ctx, {s.C}, slope);
    Tensor y = testing::poisoned_device(ctx, {n}), dx = testing::poisoned_device(ctx, {n});
    cuda::prelu_forward(s.N, s.C, s.D, xg.data<float>(), sg.data<float>(), y.data<float>(),
                        ctx.stream());
    cuda::prelu_backward_data(s.N, s.C, s.D, xg.data<float>(), sg.data<float>(), dyg.data<float>(),
                              dx.data<float>(), ctx.stream());
    const std::string shape =
        "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " D=" + std::to_string(s.D);
    SCOPED_TRACE(shape);
    EXPECT_LT(testing::rel_error(host_values(ctx, y), y_ref), 1e-7);
    EXPECT_LT(testing::rel_error(host_values(ctx, dx), dx_ref), 1e-7);
    for (cuda::PreluVersion version : kPreluVersions) {
      SCOPED_TRACE("version " + std::to_string(int(version)));
      const size_t floats = cuda::prelu_backward_slope_workspace(s.N, s.C, s.D, version);
      Tensor workspace = ctx.empty({int64_t(floats) + 1});
      ctx.fill(workspace, testing::kNaN);  // a partial the kernel never wrote would show
      std::vector<float> runs[2];
      for (std::vector<float>& run : runs) {
        Tensor dslope = testing::to_device(ctx, {s.C}, dslope0);
        cuda::prelu_backward_slope(s.N, s.C, s.D, xg.data<float>(), dyg.data<float>(),
                                   dslope.data<float>(), workspace.data<float>(), version,
                                   ctx.stream());
        run = host_values(ctx, dslope);
      }
      EXPECT_LT(testing::rel_error(runs[0], dslope_ref), 1e-6);
      EXPECT_TRUE(testing::same_bits(runs[0], runs[1])) << "not deterministic";
    }
  }
}

TEST(PreluCuda, TensorLevelSharedAndPerChannelMatchTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu_ctx;
  Random rng(5);
  const Tensor x = testing::random_tensor(rng, {4, 6, 9, 7}),
               dy = testing::random_tensor(rng, x.shape());
  for (const Shape& slope_shape : {Shape{6}, Shape{1}}) {
    SCOPED_TRACE(shape_str(slope_shape));
    const Tensor slope = testing::random_tensor(rng, slope_shape, -0.3, 0.6);
    Tensor y_cpu(x.shape()), dx_cpu(x.shape()), dslope_cpu(slope_shape);
    dslope_cpu.fill(0.5f);
    prelu_forward(cpu_ctx, x, slope, y_cpu);
    prelu_backward_slope(cpu_ctx, x, dy, dslope_cpu);
    prelu_backward_data(cpu_ctx, x, slope, dy, dx_cpu);

    const Tensor xg = testing::to_device(ctx, x), sg = testing::to_device(ctx, slope);
    Tensor t = testing::to_device(ctx, x), g = testing::to_device(ctx, dy);
    Tensor dslope = ctx.empty(slope_shape);
    ctx.fill(dslope, 0.5f);
    // In place, as the layer runs it: y over x (x kept in xg), the slope gradient before dx
    // overwrites dy.
    prelu_forward(ctx, t, sg, t);
    prelu_backward_slope(ctx, xg, g, dslope);
    prelu_backward_data(ctx, xg, sg, g, g);
    EXPECT_TRUE(testing::same_bits(host_values(ctx, t), y_cpu.to_vector()));
    EXPECT_TRUE(testing::same_bits(host_values(ctx, g), dx_cpu.to_vector()));
    EXPECT_LT(testing::rel_error(host_values(ctx, dslope), testing::to_double(dslope_cpu)), 1e-6);
  }
}

}  // namespace
}  // namespace crema::kernels::activation_test
