// RNN / LSTM / GRU on CUDA: every version against ref<double> for every cell on awkward shapes
// (layers 1-2, bidirectional, mixed lengths including 1 and T, N = 1 and 3, H = 7 and 33, odd C,
// T = 1, absent optional tensors), checking y, hT, cT and every gradient with the weight
// gradients accumulating onto random initial values; outputs, reserve and workspace poisoned with
// NaN first; bit-identical repeats; lengths beyond T (and below 1) clamped; the inference forward
// (no reserve); a forward + backward captured in a CUDA graph; the Tensor-level dispatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/rnn/rnn.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/rnn_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::RnnVersion;
using testing::expect_same_bits;
using testing::RnnCase;
using testing::RnnInputs;
using testing::RnnRun;
using testing::RnnTensors;

const std::vector<RnnVersion> kVersions = {RnnVersion::per_step_gemm, RnnVersion::fused_step};
const std::vector<RnnCell> kCells = {RnnCell::rnn_tanh, RnnCell::rnn_relu, RnnCell::lstm,
                                     RnnCell::gru};

std::string version_name(RnnVersion v) {
  return "v" + std::to_string(int(v));
}

std::string case_name(const RnnCase& c) {
  return std::string(rnn_cell_name(c.g.cell)) + " T=" + std::to_string(c.g.T) +
         " N=" + std::to_string(c.g.N) + " C=" + std::to_string(c.g.C) +
         " H=" + std::to_string(c.g.H) + " layers=" + std::to_string(c.g.layers) +
         (c.g.bidirectional ? " bidirectional" : "");
}

std::vector<RnnCase> awkward_cases(RnnCell cell) {
  std::vector<RnnCase> cases(5);
  cases[0].g = testing::rnn_geometry(cell, 5, 3, 7, 33, 2, true);
  cases[0].lengths = {5, 1, 3};
  cases[1].g = testing::rnn_geometry(cell, 1, 1, 5, 7, 1, false);
  cases[2].g = testing::rnn_geometry(cell, 4, 3, 9, 7, 1, true);
  cases[2].lengths = {1, 4, 2};
  cases[2].h0 = cases[2].c0 = cases[2].bias = false;
  cases[3].g = testing::rnn_geometry(cell, 6, 1, 3, 33, 2, false);
  cases[3].dy = false;
  cases[3].lengths = {4};
  // Several tiles of every GEMM and more than one block of every pointwise kernel.
  cases[4].g = testing::rnn_geometry(cell, 7, 37, 65, 70, 2, true);
  cases[4].lengths = std::vector<float>(37, 7.0f);
  for (size_t n = 0; n < 37; n += 4) cases[4].lengths[n] = float(1 + n % 7);
  cases[4].dhT = cases[4].dcT = false;
  return cases;
}

// Device NaN of at least one float (a size-0 buffer would still give a usable pointer).
Tensor poisoned_floats(Context& ctx, size_t floats) {
  return testing::poisoned_device(ctx, {std::max<int64_t>(1, int64_t(floats))});
}

float* mut(Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}
const float* in_ptr(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

RnnWeights<float> raw_weights(const RnnTensors& t) {
  RnnWeights<float> w;
  for (size_t p = 0; p < t.w_ih.size(); ++p) {
    w.w_ih.push_back(in_ptr(t.w_ih[p]));
    w.w_hh.push_back(in_ptr(t.w_hh[p]));
    w.b_ih.push_back(in_ptr(t.b_ih[p]));
    w.b_hh.push_back(in_ptr(t.b_hh[p]));
  }
  return w;
}

RnnWeightGrads<float> raw_grads(RnnTensors& t) {
  RnnWeightGrads<float> dw;
  for (size_t p = 0; p < t.dw_ih.size(); ++p) {
    dw.w_ih.push_back(mut(t.dw_ih[p]));
    dw.w_hh.push_back(mut(t.dw_hh[p]));
    dw.b_ih.push_back(mut(t.db_ih[p]));
    dw.b_hh.push_back(mut(t.db_hh[p]));
  }
  return dw;
}

// The raw cuda:: forward + backward of one version, reserve and workspace poisoned.
struct VersionRun {
  RnnTensors t;
  Tensor reserve, workspace;

  VersionRun(Context& ctx, const RnnGeometry& g, const RnnInputs& in, RnnVersion v)
      : t(testing::rnn_tensors(ctx, g, in)),
        reserve(poisoned_floats(ctx, cuda::rnn_reserve_floats(g, v))),
        workspace(poisoned_floats(ctx, cuda::rnn_workspace_floats(g, v))) {}

  void forward(Context& ctx, const RnnGeometry& g, RnnVersion v) {
    cuda::rnn_forward(g, in_ptr(t.x), in_ptr(t.lengths), in_ptr(t.h0), in_ptr(t.c0), raw_weights(t),
                      mut(t.y), mut(t.hT), mut(t.cT), mut(reserve), mut(workspace), ctx.stream(),
                      v);
  }
  void backward(Context& ctx, const RnnGeometry& g, RnnVersion v) {
    cuda::rnn_backward(g, in_ptr(t.x), in_ptr(t.lengths), in_ptr(t.h0), in_ptr(t.c0),
                       raw_weights(t), in_ptr(t.y), in_ptr(reserve), in_ptr(t.dy), in_ptr(t.dhT),
                       in_ptr(t.dcT), mut(t.dx), mut(t.dh0), mut(t.dc0), raw_grads(t),
                       mut(workspace), ctx.stream(), v);
  }
  RnnRun results(Context& ctx) {
    ctx.synchronize();
    RnnRun r;
    r.y = testing::rnn_values(t.y);
    r.hT = testing::rnn_values(t.hT);
    r.cT = testing::rnn_values(t.cT);
    r.dx = testing::rnn_values(t.dx);
    r.dh0 = testing::rnn_values(t.dh0);
    r.dc0 = testing::rnn_values(t.dc0);
    for (size_t p = 0; p < t.dw_ih.size(); ++p) {
      r.dw_ih.push_back(testing::rnn_values(t.dw_ih[p]));
      r.dw_hh.push_back(testing::rnn_values(t.dw_hh[p]));
      r.db_ih.push_back(testing::rnn_values(t.db_ih[p]));
      r.db_hh.push_back(testing::rnn_values(t.db_hh[p]));
    }
    return r;
  }
};

RnnRun run_version(Context& ctx, const RnnGeometry& g, const RnnInputs& in, RnnVersion v) {
  VersionRun run(ctx, g, in, v);
  run.forward(ctx, g, v);
  run.backward(ctx, g, v);
  return run.results(ctx);
}

TEST(RnnCuda, EveryVersionMatchesTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(5);
  for (const RnnCell cell : kCells) {
    for (const RnnCase& c : awkward_cases(cell)) {
      const RnnInputs in = testing::random_rnn_inputs(c, rng);
      const RnnRun expected = testing::run_rnn_reference(c.g, in);
      for (const RnnVersion v : kVersions) {
        SCOPED_TRACE(case_name(c) + " " + version_name(v));
        testing::expect_rnn_close(run_version(ctx, c.g, in, v), expected, 1e-5);
      }
    }
  }
}

TEST(RnnCuda, RepeatsAreBitIdentical) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const RnnCell cell : {RnnCell::lstm, RnnCell::gru}) {
    const RnnCase c = awkward_cases(cell)[4];
    Random rng(9);
    const RnnInputs in = testing::random_rnn_inputs(c, rng);
    for (const RnnVersion v : kVersions) {
      SCOPED_TRACE(case_name(c) + " " + version_name(v));
      expect_same_bits(run_version(ctx, c.g, in, v), run_version(ctx, c.g, in, v));
    }
  }
}

// Lengths are read on the device and clamped into [0, T]: beyond T runs T steps, below 1 runs
// none (outputs 0, hT = h0, no gradient through the sequence).
TEST(RnnCuda, LengthsOutsideTheRangeAreClamped) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const RnnCell cell : kCells) {
    RnnCase c;
    c.g = testing::rnn_geometry(cell, 4, 3, 5, 9, 2, true);
    c.lengths = {7.0f, 2.0f, 1e9f};
    Random rng(13);
    const RnnInputs in = testing::random_rnn_inputs(c, rng);
    RnnInputs clamped = in;
    clamped.lengths = {4.0f, 2.0f, 4.0f};
    const RnnRun expected = testing::run_rnn_reference(c.g, clamped);
    for (const RnnVersion v : kVersions) {
      SCOPED_TRACE(case_name(c) + " " + version_name(v));
      testing::expect_rnn_close(run_version(ctx, c.g, in, v), expected, 1e-5);
    }
    RnnInputs empty = in;
    empty.lengths = {-3.0f, 0.0f, 0.5f};
    const int64_t state = c.g.passes() * c.g.N * c.g.H;
    for (const RnnVersion v : kVersions) {
      SCOPED_TRACE(case_name(c) + " no steps " + version_name(v));
      const RnnRun r = run_version(ctx, c.g, empty, v);
      EXPECT_EQ(r.y, std::vector<double>(r.y.size(), 0.0));
      EXPECT_EQ(r.hT, testing::to_double(empty.h0));
      EXPECT_EQ(r.dh0, testing::to_double(empty.dhT));
      EXPECT_EQ(r.dx, std::vector<double>(r.dx.size(), 0.0));
      EXPECT_EQ(int64_t(r.hT.size()), state);
    }
  }
}

// Without a reserve the states ping-pong in the workspace; the outputs are the training
// forward's, bit for bit.
TEST(RnnCuda, InferenceForwardMatchesTheTrainingForward) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(17);
  for (const RnnCell cell : kCells) {
    const RnnCase c = awkward_cases(cell)[0];
    const RnnInputs in = testing::random_rnn_inputs(c, rng);
    for (const RnnVersion v : kVersions) {
      SCOPED_TRACE(case_name(c) + " " + version_name(v));
      VersionRun training(ctx, c.g, in, v), inference(ctx, c.g, in, v);
      training.forward(ctx, c.g, v);
      cuda::rnn_forward(c.g, in_ptr(inference.t.x), in_ptr(inference.t.lengths),
                        in_ptr(inference.t.h0), in_ptr(inference.t.c0), raw_weights(inference.t),
                        mut(inference.t.y), mut(inference.t.hT), mut(inference.t.cT), nullptr,
                        mut(inference.workspace), ctx.stream(), v);
      const RnnRun a = training.results(ctx), b = inference.results(ctx);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.hT, b.hT);
      EXPECT_EQ(a.cT, b.cT);
      EXPECT_EQ(testing::count_nan(inference.t.y.to_vector()), 0);
    }
  }
}

// Nothing synchronizes, allocates or copies to the host inside a call: a forward + backward is
// captured in a CUDA graph, and one replay gives what the direct calls give.
TEST(RnnCuda, ForwardAndBackwardCaptureInAGraph) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const RnnCase c = awkward_cases(RnnCell::lstm)[0];
  Random rng(19);
  const RnnInputs in = testing::random_rnn_inputs(c, rng);
  for (const RnnVersion v : kVersions) {
    SCOPED_TRACE(version_name(v));
    const RnnRun direct = run_version(ctx, c.g, in, v);
    VersionRun run(ctx, c.g, in, v);
    ctx.synchronize();
    gpu::begin_capture(ctx.stream());
    run.forward(ctx, c.g, v);
    run.backward(ctx, c.g, v);
    const gpu::Graph graph = gpu::end_capture(ctx.stream());
    gpu::launch(graph, ctx.stream());
    const RnnRun replayed = run.results(ctx);
    gpu::destroy_graph(graph);
    expect_same_bits(direct, replayed);
  }
}

TEST(RnnCuda, TensorLevelDispatchRunsTheBestVersion) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (const RnnCell cell : kCells) {
    const RnnCase c = awkward_cases(cell)[0];
    Random rng(23);
    const RnnInputs in = testing::random_rnn_inputs(c, rng);
    SCOPED_TRACE(case_name(c));
    const RnnRun expected = testing::run_rnn_reference(c.g, in);
    testing::expect_rnn_close(testing::run_rnn_tensors(ctx, c.g, in), expected, 1e-5);
    expect_same_bits(testing::run_rnn_tensors(ctx, c.g, in),
                     run_version(ctx, c.g, in, RnnVersion::best));
  }
}

}  // namespace
}  // namespace crema::kernels
