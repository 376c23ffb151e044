// What the CUDA convolution tests share: random problems with their expected results (ref:: in
// double, or the CPU path for large batches), the tensors on the device, and a check of every
// pass of one version in one math (outputs poisoned with NaN, dw and db pre-filled;
// ||out - ref|| / ||ref|| below 1e-5 in fp32, below conv_find_tolerance(math) for a version that
// computes in tf32 or bf16), and a check that repeated passes give the same bits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/select.h"
#include "tests/kernels/convolution_test_util.h"

namespace crema::kernels::conv_test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Every record the tests walk: the whole ladder, production's and the ladder's.
inline const std::vector<const ConvAlgorithm*>& algorithms() {
  return conv_ladder();
}
// The ladder's record called `name` (every test names one that exists).
inline const ConvAlgorithm& record(const std::string& name) {
  for (const ConvAlgorithm* a : conv_ladder()) {
    if (name == a->name) return *a;
  }
  throw Error("no convolution algorithm '" + name + "'");
}
// The heuristic's record per pass.
inline const ConvAlgorithm* forward_version(const Conv2dGeometry& g,
                                            cuda::GemmMath math = cuda::GemmMath::fp32) {
  return &get_conv_algorithm(ConvPass::forward, g, math);
}
inline const ConvAlgorithm* backward_data_version(const Conv2dGeometry& g,
                                                  cuda::GemmMath math = cuda::GemmMath::fp32) {
  return &get_conv_algorithm(ConvPass::backward_data, g, math);
}
inline const ConvAlgorithm* backward_filter_version(const Conv2dGeometry& g,
                                                    cuda::GemmMath math = cuda::GemmMath::fp32) {
  return &get_conv_algorithm(ConvPass::backward_filter, g, math);
}

inline Conv2dGeometry lenet_conv1(int64_t N) {
  return {N, 1, 28, 28, 20, 5, 5};
}
inline Conv2dGeometry lenet_conv2(int64_t N) {
  return {N, 20, 12, 12, 50, 5, 5};
}

inline std::vector<float> random_values(Random& rng, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = float(rng.uniform(-1.0, 1.0));
  return v;
}

// Inputs, the parameter gradients' starting values, and what every pass must produce.
struct Problem {
  Conv2dGeometry g;
  std::vector<float> x, w, bias, dy, dw0, db0;
  std::vector<double> y, y_no_bias, dx, dw, db;  // dw = dw0 + gradient, db likewise
};

inline Problem make_inputs(const Conv2dGeometry& g, uint64_t seed) {
  Random rng(seed);
  Problem p;
  p.g = g;
  p.x = random_values(rng, g.N * g.C * g.H * g.W);
  p.w = random_values(rng, g.K * (g.C / g.groups) * g.R * g.S);
  p.bias = random_values(rng, g.K);
  p.dy = random_values(rng, g.N * g.K * g.P() * g.Q());
  p.dw0 = random_values(rng, int64_t(p.w.size()));
  p.db0 = random_values(rng, g.K);
  return p;
}

inline void fill_no_bias(Problem& p) {
  const int64_t PQ = p.g.P() * p.g.Q();
  p.y_no_bias = p.y;
  for (size_t i = 0; i < p.y.size(); ++i) p.y_no_bias[i] -= p.bias[i / PQ % p.g.K];
}

// The expectations from ref:: in double.
inline Problem reference_problem(const Conv2dGeometry& g, uint64_t seed) {
  Problem p = make_inputs(g, seed);
  const std::vector<double> x(p.x.begin(), p.x.end()), w(p.w.begin(), p.w.end()),
      bias(p.bias.begin(), p.bias.end()), dy(p.dy.begin(), p.dy.end());
  p.y.resize(p.dy.size());
  p.dx.resize(p.x.size());
  p.dw.assign(p.dw0.begin(), p.dw0.end());
  p.db.assign(p.db0.begin(), p.db0.end());
  ref::conv2d_forward<double>(g, x.data(), w.data(), bias.data(), p.y.data());
  ref::conv2d_backward_data<double>(g, dy.data(), w.data(), p.dx.data());
  ref::conv2d_backward_filter<double>(g, x.data(), dy.data(), p.dw.data());
  ref::conv2d_backward_bias<double>(g, dy.data(), p.db.data());
  fill_no_bias(p);
  return p;
}

// The expectations from the CPU path (float, 2 threads): fast enough for LeNet at N = 256.
inline Problem cpu_problem(const Conv2dGeometry& g, uint64_t seed) {
  constexpr int kThreads = 2;
  Problem p = make_inputs(g, seed);
  std::vector<float> ws(std::max({cpu::conv2d_forward_workspace(g, kThreads),
                                  cpu::conv2d_backward_data_workspace(g, kThreads),
                                  cpu::conv2d_backward_filter_workspace(g, kThreads)}));
  std::vector<float> y(p.dy.size()), dx(p.x.size()), dw = p.dw0, db = p.db0;
  cpu::conv2d_forward(g, p.x.data(), p.w.data(), p.bias.data(), y.data(), ws.data(), kThreads);
  cpu::conv2d_backward_data(g, p.dy.data(), p.w.data(), dx.data(), ws.data(), kThreads);
  cpu::conv2d_backward_filter(g, p.x.data(), p.dy.data(), dw.data(), ws.data(), kThreads);
  cpu::conv2d_backward_bias(g, p.dy.data(), db.data(), kThreads);
  p.y.assign(y.begin(), y.end());
  p.dx.assign(dx.begin(), dx.end());
  p.dw.assign(dw.begin(), dw.end());
  p.db.assign(db.begin(), db.end());
  fill_no_bias(p);
  return p;
}

inline Tensor upload(Context& ctx, const std::vector<float>& host) {
  Tensor t = ctx.empty({int64_t(host.size())});
  t.copy_from(Tensor::from_vector({int64_t(host.size())}, host));
  return t;
}

// Every element finite (NaN poison overwritten) and ||out - ref|| / ||ref|| < tolerance.
// Returns that relative error.
inline double expect_close(const std::vector<float>& out, const std::vector<double>& expected,
                           const std::string& what, double tolerance = 1e-5) {
  EXPECT_EQ(out.size(), expected.size()) << what;
  if (out.size() != expected.size()) return INFINITY;
  double diff = 0, norm = 0;
  int64_t not_finite = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    not_finite += !std::isfinite(out[i]);
    diff += (out[i] - expected[i]) * (out[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  EXPECT_EQ(not_finite, 0) << what << ": elements not written";
  EXPECT_LT(std::sqrt(diff), tolerance * std::sqrt(norm) + 1e-30) << what;
  return std::sqrt(diff) / (std::sqrt(norm) + 1e-30);
}
inline double expect_close(const Tensor& t, const std::vector<double>& expected,
                           const std::string& what, double tolerance = 1e-5) {
  return expect_close(t.to_vector(), expected, what, tolerance);
}

// The problem's tensors on the device.
struct DeviceTensors {
  Tensor x, w, bias, dy, y, dx, dw, db;
  DeviceTensors(Context& ctx, const Problem& p)
      : x(upload(ctx, p.x)),
        w(upload(ctx, p.w)),
        bias(upload(ctx, p.bias)),
        dy(upload(ctx, p.dy)),
        y(ctx.empty({int64_t(p.dy.size())})),
        dx(ctx.empty({int64_t(p.x.size())})),
        dw(ctx.empty({int64_t(p.w.size())})),
        db(ctx.empty({p.g.K})) {}
};

inline float* workspace_for(Context& ctx, const Conv2dGeometry& g, const ConvAlgorithm& a) {
  return ctx.workspace(std::max({a.workspace(ConvPass::forward, g, false),
                                 a.workspace(ConvPass::backward_data, g, false),
                                 a.workspace(ConvPass::backward_filter, g, false),
                                 a.workspace(ConvPass::backward_filter, g, true)}));
}

// All passes of one record that it supports for the geometry, in `math`: forward with and
// without bias, data, filter alone, filter with the fused bias gradient, and the bias gradient
// alone. Each pass is held to its math's tolerance where the record computes it in the math
// (ConvAlgorithm::computes_in), else to fp32's. Returns, per pass (indexed by int(ConvPass)), the
// largest relative error of its outputs when the pass is computed in a math other than fp32 (0
// when it is not, or not supported).
inline std::array<double, 3> check_algorithm(Context& ctx, const Problem& p, const ConvAlgorithm& a,
                                             cuda::GemmMath math = cuda::GemmMath::fp32) {
  const Conv2dGeometry& g = p.g;
  const std::string what = describe(g) + " " + a.name + " " + cuda::gemm_math_name(math);
  std::array<double, 3> worst{};
  auto close = [&](const Tensor& t, const std::vector<double>& expected, ConvPass pass,
                   const std::string& name) {
    const bool in_math = math != cuda::GemmMath::fp32 && a.computes_in(pass, math);
    const double error =
        expect_close(t, expected, what + " " + name, in_math ? conv_find_tolerance(math) : 1e-5);
    if (in_math) worst[int(pass)] = std::max(worst[int(pass)], error);
  };
  DeviceTensors d(ctx, p);
  float* ws = workspace_for(ctx, g, a);
  const gpu::Stream s = ctx.stream();
  EXPECT_TRUE(a.supports(ConvPass::forward, g)) << what;
  EXPECT_TRUE(a.supports(ConvPass::backward_filter, g)) << what;
  ctx.fill(d.y, kNaN);
  a.forward(g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(), d.y.data<float>(), ws, s,
            math);
  ctx.synchronize();
  close(d.y, p.y, ConvPass::forward, "forward");
  ctx.fill(d.y, kNaN);
  a.forward(g, d.x.data<float>(), d.w.data<float>(), nullptr, d.y.data<float>(), ws, s, math);
  ctx.synchronize();
  close(d.y, p.y_no_bias, ConvPass::forward, "forward without bias");
  if (a.supports(ConvPass::backward_data, g)) {
    ctx.fill(d.dx, kNaN);
    a.backward_data(g, d.dy.data<float>(), d.w.data<float>(), d.dx.data<float>(), ws, s, math);
    ctx.synchronize();
    close(d.dx, p.dx, ConvPass::backward_data, "backward data");
  }
  d.dw.copy_from(upload(ctx, p.dw0));
  a.backward_filter(g, d.x.data<float>(), d.dy.data<float>(), d.dw.data<float>(), nullptr, ws, s,
                    math);
  ctx.synchronize();
  close(d.dw, p.dw, ConvPass::backward_filter, "backward filter");
  d.dw.copy_from(upload(ctx, p.dw0));
  d.db.copy_from(upload(ctx, p.db0));
  a.backward_filter(g, d.x.data<float>(), d.dy.data<float>(), d.dw.data<float>(),
                    d.db.data<float>(), ws, s, math);
  ctx.synchronize();
  close(d.dw, p.dw, ConvPass::backward_filter, "backward filter (with bias)");
  close(d.db, p.db, ConvPass::backward_filter, "backward bias (fused)");
  d.db.copy_from(upload(ctx, p.db0));
  cuda::conv2d_backward_bias(g, d.dy.data<float>(), d.db.data<float>(), s);
  ctx.synchronize();
  expect_close(d.db, p.db, what + " backward bias (alone)");
  return worst;
}

// Runs forward (with bias), backward data and backward filter (dw from dw0; with the fused bias
// gradient, db from db0, when `with_bias`) twice from the same inputs, in fp32, each pass by its
// own record, and expects the same bits from both runs: the versions sum in fixed orders, with no
// atomics. The workspace is sized for `filter`.
inline void expect_repeatable(Context& ctx, const Problem& p, const ConvAlgorithm& forward,
                              const ConvAlgorithm& data, const ConvAlgorithm& filter,
                              bool with_bias, const std::string& what) {
  const Conv2dGeometry& g = p.g;
  const gpu::Stream s = ctx.stream();
  const cuda::GemmMath fp32 = cuda::GemmMath::fp32;
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 2; ++run) {
    DeviceTensors d(ctx, p);
    d.dw.copy_from(upload(ctx, p.dw0));
    if (with_bias) d.db.copy_from(upload(ctx, p.db0));
    float* ws = workspace_for(ctx, g, filter);
    forward.forward(g, d.x.data<float>(), d.w.data<float>(), d.bias.data<float>(),
                    d.y.data<float>(), ws, s, fp32);
    data.backward_data(g, d.dy.data<float>(), d.w.data<float>(), d.dx.data<float>(), ws, s, fp32);
    filter.backward_filter(g, d.x.data<float>(), d.dy.data<float>(), d.dw.data<float>(),
                           with_bias ? d.db.data<float>() : nullptr, ws, s, fp32);
    ctx.synchronize();
    std::vector<std::vector<float>> outs = {d.y.to_vector(), d.dx.to_vector(), d.dw.to_vector()};
    if (with_bias) outs.push_back(d.db.to_vector());
    if (run == 0) {
      first = outs;
      continue;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_EQ(std::memcmp(first[i].data(), outs[i].data(), outs[i].size() * sizeof(float)), 0)
          << what << " output " << i << " (y, dx, dw, db)";
    }
  }
}
// The same with one record running every pass, without the bias gradient.
inline void expect_repeatable(Context& ctx, const Problem& p, const ConvAlgorithm& a) {
  expect_repeatable(ctx, p, a, a, a, false, a.name);
}

}  // namespace crema::kernels::conv_test
