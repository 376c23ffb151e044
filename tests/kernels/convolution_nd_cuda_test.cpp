// N-d convolution on the GPU, against the double reference on the awkward geometries of
// convolution_nd_test_util.h (and a few more along depth), outputs poisoned with NaN, dw and db
// pre-filled (they accumulate), ||out - ref|| / ||ref|| below 1e-5 (fp32):
//   - every pass of the Tensor-level calls (rank 1 and 2 through the 2-D algorithms, rank 3
//     through depth_col, the rule's choice for every geometry here);
//   - rank 3's two algorithms at the pointer level: depth_col in one chunk and in one image a
//     chunk (workspace poisoned too, db given or not), vol2col; bit-identical repeats;
//   - C3D's two layers (conv2, conv3a) through the Tensor level against the CPU path, repeated.
#include <gtest/gtest.h>

#include <algorithm>
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

const char* const kResults[4] = {"forward", "backward data", "backward filter", "backward bias"};

// y (with bias), dx, dw0 + dw and db0 + db of the double reference.
std::vector<std::vector<double>> reference(const ConvNdGeometry& g, const NdProblem& p) {
  const std::vector<double> x = widen(p.x), w = widen(p.w), dy = widen(p.dy);
  const std::vector<double> bias = widen(p.bias);
  std::vector<double> y(dy.size()), dx(x.size()), dw = widen(p.dw0), db = widen(p.db0);
  ref::conv_nd_forward(g, x.data(), w.data(), bias.data(), y.data());
  ref::conv_nd_backward_data(g, dy.data(), w.data(), dx.data());
  ref::conv_nd_backward_filter(g, x.data(), dy.data(), dw.data());
  ref::channel_bias_gradient(g.N, g.K, g.out_volume(), dy.data(), db.data());
  return {y, dx, dw, db};
}

void expect_results(const std::vector<std::vector<float>>& got,
                    const std::vector<std::vector<double>>& want, const std::string& what) {
  for (int i = 0; i < 4; ++i) {
    const Tensor t = Tensor::from_vector({int64_t(got[i].size())}, got[i]);
    expect_close(t, want[i], what + " " + kResults[i]);
  }
}

void expect_same_bits(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b, const std::string& what) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
        << what << " " << kResults[i] << ": repeat differs";
  }
}

// The problem's tensors on the device: y and dx poisoned, dw and db holding dw0 and db0.
struct NdTensors {
  Tensor x, w, bias, dy, y, dx, dw, db;
  NdTensors(Context& ctx, const ConvNdGeometry& g, const NdProblem& p)
      : x(put(ctx, g.x_shape(), p.x)),
        w(put(ctx, g.w_shape(), p.w)),
        bias(put(ctx, {g.K}, p.bias)),
        dy(put(ctx, g.y_shape(), p.dy)),
        y(ctx.empty(g.y_shape())),
        dx(ctx.empty(g.x_shape())),
        dw(put(ctx, g.w_shape(), p.dw0)),
        db(put(ctx, {g.K}, p.db0)) {
    ctx.fill(y, kNaN);
    ctx.fill(dx, kNaN);
  }
  static Tensor put(Context& ctx, const Shape& shape, const std::vector<float>& host) {
    Tensor t = ctx.empty(shape);
    t.copy_from(Tensor::from_vector(shape, host));
    return t;
  }
  std::vector<std::vector<float>> results(Context& ctx) {
    ctx.synchronize();
    return {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
  }
};

// The four results of one context's Tensor-level passes, as host floats (y, dx, dw, db).
std::vector<std::vector<float>> run_passes(Context& ctx, const ConvNdGeometry& g,
                                           const NdProblem& p) {
  NdTensors d(ctx, g, p);
  conv_nd_forward(ctx, g, d.x, d.w, &d.bias, d.y);
  conv_nd_backward_data(ctx, g, d.dy, d.w, d.dx);
  conv_nd_backward_weights(ctx, g, d.x, d.dy, &d.dw, &d.db);
  return d.results(ctx);
}

// depth_col's passes on device pointers with the plan `scratch_floats` gives, each 2-D pass the
// heuristic's record, the workspace poisoned before each pass; the filter pass with db when
// `with_bias` (else db stays db0).
std::vector<std::vector<float>> run_depth_col(Context& ctx, const ConvNdGeometry& g,
                                              const NdProblem& p, int64_t scratch_floats,
                                              bool with_bias) {
  const cuda::ConvNdDepthPlan plan = cuda::conv_nd_depth_plan(g, scratch_floats);
  const ConvAlgorithm& forward = get_conv_algorithm(ConvPass::forward, plan.g2);
  const ConvAlgorithm& data = get_conv_algorithm(ConvPass::backward_data, plan.g2);
  const ConvAlgorithm& filter = get_conv_algorithm(ConvPass::backward_filter, plan.g2);
  const size_t floats = std::max(
      {cuda::conv_nd_depth_workspace(ConvPass::forward, g, plan, forward, false),
       cuda::conv_nd_depth_workspace(ConvPass::backward_data, g, plan, data, false),
       cuda::conv_nd_depth_workspace(ConvPass::backward_filter, g, plan, filter, with_bias)});
  Tensor workspace = ctx.empty({int64_t(floats)});
  float* ws = workspace.data<float>();
  NdTensors d(ctx, g, p);
  const gpu::Stream s = ctx.stream();
  const cuda::GemmMath fp32 = cuda::GemmMath::fp32;
  ctx.fill(workspace, kNaN);
  cuda::conv_nd_depth_forward(g, plan, forward, fp32, d.x.data<float>(), d.w.data<float>(),
                              d.bias.data<float>(), d.y.data<float>(), ws, s);
  ctx.fill(workspace, kNaN);
  cuda::conv_nd_depth_backward_data(g, plan, data, fp32, d.dy.data<float>(), d.w.data<float>(),
                                    d.dx.data<float>(), ws, s);
  ctx.fill(workspace, kNaN);
  cuda::conv_nd_depth_backward_filter(g, plan, filter, fp32, d.x.data<float>(), d.dy.data<float>(),
                                      d.dw.data<float>(), with_bias ? d.db.data<float>() : nullptr,
                                      ws, s);
  return d.results(ctx);
}

// vol2col's passes on device pointers (its bias gradient is the shared reduction).
std::vector<std::vector<float>> run_vol2col(Context& ctx, const ConvNdGeometry& g,
                                            const NdProblem& p) {
  Tensor workspace = ctx.empty({int64_t(cuda::conv_nd_workspace(g))});
  float* ws = workspace.data<float>();
  NdTensors d(ctx, g, p);
  const gpu::Stream s = ctx.stream();
  cuda::conv_nd_forward(g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(),
                        d.y.data<float>(), ws, s);
  cuda::conv_nd_backward_data(g, d.dy.data<float>(), d.w.data<float>(), d.dx.data<float>(), ws, s);
  cuda::conv_nd_backward_filter(g, d.x.data<float>(), d.dy.data<float>(), d.dw.data<float>(), ws,
                                s);
  cuda::channel_bias_gradient(g.N, g.K, g.out_volume(), d.dy.data<float>(), d.db.data<float>(), s);
  return d.results(ctx);
}

// The rank-3 geometries of nd_geometries() and more along depth: odd extents, N = 1, C not a
// multiple of 8, padding 0 and 2, stride 2 and 3 in depth and in the plane, dilation 2, groups,
// depth-only filters (a pointwise 2-D pass) and enough channels for Winograd's 2-D passes
// (C*T and K of 32 and more), rows of 4n floats (float4 copies) and of others.
std::vector<ConvNdGeometry> depth_geometries() {
  std::vector<ConvNdGeometry> all;
  for (const ConvNdGeometry& g : nd_geometries()) {
    if (g.rank == 3) all.push_back(g);
  }
  const std::vector<ConvNdGeometry> more = {
      // rank N C  K  in          kernel     pad        stride     dilation   groups
      {3, 1, 5, 7, {9, 7, 5}, {3, 3, 3}, {2, 0, 2}, {2, 2, 1}, {2, 1, 2}, 1},
      {3, 2, 6, 9, {7, 5, 6}, {3, 3, 3}, {0, 1, 1}, {3, 1, 1}, {1, 1, 1}, 3},
      {3, 3, 12, 8, {5, 8, 8}, {5, 1, 1}, {2, 0, 0}, {1, 1, 1}, {1, 1, 1}, 2},
      {3, 2, 11, 32, {6, 12, 12}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1},
      {3, 3, 16, 40, {7, 9, 11}, {3, 3, 3}, {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, 1},
  };
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

// depth_col's plan and the memory plan's query, on the host (no GPU needed): the chunk divides N
// and bounds the scratch; the 2-D geometry is the formula's; the query counts the scratch and the
// 2-D record the request would pick (the heuristic's, a pinned one, the memo's for that geometry;
// under a workspace limit one that fits what the scratch leaves).
TEST(ConvolutionNdCuda, DepthColPlanAndWorkspaceQuery) {
  const Device gpu = Device::cuda(0);
  const ConvNdGeometry g{3, 12, 6, 8, {9, 10, 7}, {3, 3, 2}, {2, 1, 0}, {2, 1, 1}, {2, 1, 1}, 2};
  const cuda::ConvNdDepthPlan whole = cuda::conv_nd_depth_plan(g);
  EXPECT_EQ(whole.chunk, 12);
  const int64_t O = g.out(0);
  const int64_t per_image = O * g.C * 3 * 10 * 7 + O * g.K * g.out(1) * g.out(2);
  const cuda::ConvNdDepthPlan part = cuda::conv_nd_depth_plan(g, 5 * per_image + 100);
  EXPECT_EQ(part.chunk, 4);  // the largest divisor of 12 that fits 5 images
  const Conv2dGeometry& g2 = part.g2;
  EXPECT_EQ(g2.x_shape(), (Shape{4 * O, 18, 10, 7}));
  EXPECT_EQ(g2.w_shape(), (Shape{8, 9, 3, 2}));
  EXPECT_EQ(g2.y_shape(), (Shape{4 * O, 8, g.out(1), g.out(2)}));
  EXPECT_EQ(g2.pad_h, 1);
  EXPECT_EQ(g2.pad_w, 0);
  EXPECT_EQ(g2.groups, 2);
  const size_t scratch = size_t(whole.g2.N * whole.g2.C * 10 * 7 +
                                whole.g2.N * whole.g2.K * whole.g2.P() * whole.g2.Q());
  for (const ConvPass pass :
       {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
    const auto query = [&](const ConvRequest& request) {
      return conv_nd_workspace_bytes(gpu, pass, g, DType::f32, Layout::nchw, request, true, 1);
    };
    const ConvAlgorithm& heuristic = get_conv_algorithm(pass, whole.g2);
    const size_t heuristic_bytes =
        cuda::conv_nd_depth_workspace(pass, g, whole, heuristic, true) * sizeof(float);
    EXPECT_EQ(query({}), heuristic_bytes);
    EXPECT_GE(heuristic_bytes, scratch * sizeof(float));
    const ConvAlgorithm& im2col = *conv_algorithm_named("im2col_gemm");
    const size_t im2col_bytes =
        cuda::conv_nd_depth_workspace(pass, g, whole, im2col, true) * sizeof(float);
    EXPECT_EQ(query(ConvRequest::pin(im2col)), im2col_bytes);
    ConvMemo memo{whole.g2, &im2col};
    ConvRequest remembered;
    remembered.memo = &memo;
    EXPECT_EQ(query(remembered), im2col_bytes);
    // A limit of the scratch and im2col's workspace leaves the 2-D choice the latter.
    const size_t left = im2col.workspace(pass, whole.g2, true) * sizeof(float);
    ConvRequest limited;
    limited.workspace_limit = scratch * sizeof(float) + left;
    const ConvAlgorithm& fits = get_conv_algorithm(pass, whole.g2, cuda::GemmMath::fp32, left);
    EXPECT_EQ(query(limited),
              cuda::conv_nd_depth_workspace(pass, g, whole, fits, true) * sizeof(float));
  }
}

TEST(ConvolutionNdCuda, AwkwardGeometriesAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 1;
  for (const ConvNdGeometry& g : nd_geometries()) {
    SCOPED_TRACE(describe(g));
    if (g.rank == 3) {
      EXPECT_TRUE(cuda::conv_nd_depth_supports(g)) << "auto runs depth_col";
    }
    const NdProblem p = random_problem(g, seed += 16);
    expect_results(run_passes(ctx, g, p), reference(g, p), "tensor level");
  }
}

// depth_col in one chunk (the default plan: these batches fit) and in one image a chunk, with
// and without db; each run twice gives the same bits.
TEST(ConvolutionNdCuda, DepthColAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 5;
  for (const ConvNdGeometry& g : depth_geometries()) {
    SCOPED_TRACE(describe(g));
    ASSERT_TRUE(cuda::conv_nd_depth_supports(g));
    const NdProblem p = random_problem(g, seed += 16);
    const std::vector<std::vector<double>> want = reference(g, p);
    EXPECT_EQ(cuda::conv_nd_depth_plan(g).chunk, g.N);
    EXPECT_EQ(cuda::conv_nd_depth_plan(g, 1).chunk, 1);
    for (const int64_t scratch : {cuda::kConvNdDepthScratchFloats, int64_t(1)}) {
      const std::string what = "depth_col, chunk " + std::to_string(scratch == 1 ? 1 : g.N);
      const std::vector<std::vector<float>> got = run_depth_col(ctx, g, p, scratch, true);
      expect_results(got, want, what);
      expect_same_bits(run_depth_col(ctx, g, p, scratch, true), got, what);
      // Without db: dw the same, db untouched.
      const std::vector<std::vector<float>> no_bias = run_depth_col(ctx, g, p, scratch, false);
      EXPECT_EQ(std::memcmp(no_bias[2].data(), got[2].data(), got[2].size() * sizeof(float)), 0)
          << what << ": dw differs without db";
      EXPECT_EQ(no_bias[3], p.db0) << what << ": db written without being asked";
    }
  }
}

TEST(ConvolutionNdCuda, Vol2colAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 9;
  for (const ConvNdGeometry& g : depth_geometries()) {
    SCOPED_TRACE(describe(g));
    const NdProblem p = random_problem(g, seed += 16);
    const std::vector<std::vector<float>> got = run_vol2col(ctx, g, p);
    expect_results(got, reference(g, p), "vol2col");
    expect_same_bits(run_vol2col(ctx, g, p), got, "vol2col");
  }
}

// A C3D-sized layer whose batch runs in several chunks of vol2col's workspace (col of one image
// is 64*27 x 8*28*28 floats: 6 images a chunk), against the CPU path.
TEST(ConvolutionNdCuda, Vol2colChunkedBatchAgainstCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu(Device::cpu(), 1, 2);
  const ConvNdGeometry g{3, 9, 64, 32, {8, 28, 28}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1};
  // The whole batch would need (CTRS + Kg) * N * O floats: the workspace holds fewer images.
  const size_t per_image = size_t((64 * 27 + 32) * g.out_volume());
  ASSERT_LT(cuda::conv_nd_workspace(g), per_image * size_t(g.N));
  const NdProblem p = random_problem(g, 77);
  const std::vector<std::vector<float>> on_cpu = run_passes(cpu, g, p);
  expect_results(run_vol2col(gpu, g, p),
                 {widen(on_cpu[0]), widen(on_cpu[1]), widen(on_cpu[2]), widen(on_cpu[3])},
                 "vol2col against the cpu");
}

// C3D's conv2 (64 -> 128 at 16x56x56; one image, 11.1 G multiply-adds a pass) and conv3a
// (128 -> 256 at 8x28x28, two images) through the Tensor level -- depth_col, the 2-D records the
// heuristic picks for them (Winograd where it pays) -- against the CPU path (the double
// reference would take minutes), then again for the same bits. The benchmark's batch of 8 runs
// conv2 in two chunks of 4 images (ASSERTed on the plan).
TEST(ConvolutionNdCuda, C3dLayersAgainstCpuAndRepeatable) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu(Device::cpu(), 1, 8);
  const ConvNdGeometry conv2{3,         1,         64,        128,       {16, 56, 56},
                             {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1};
  const ConvNdGeometry conv3a{3,         2,         128,       256,       {8, 28, 28},
                              {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1};
  ConvNdGeometry batch8 = conv2;
  batch8.N = 8;
  EXPECT_EQ(cuda::conv_nd_depth_plan(batch8).chunk, 4);
  uint64_t seed = 101;
  for (const ConvNdGeometry& g : {conv2, conv3a}) {
    SCOPED_TRACE(describe(g));
    ASSERT_TRUE(cuda::conv_nd_depth_supports(g));
    const NdProblem p = random_problem(g, seed += 16);
    const std::vector<std::vector<float>> on_cpu = run_passes(cpu, g, p);
    const std::vector<std::vector<float>> on_gpu = run_passes(gpu, g, p);
    expect_results(on_gpu, {widen(on_cpu[0]), widen(on_cpu[1]), widen(on_cpu[2]), widen(on_cpu[3])},
                   "depth_col against the cpu");
    expect_same_bits(run_passes(gpu, g, p), on_gpu, "depth_col");
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
