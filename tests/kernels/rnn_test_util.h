// Helpers shared by the RNN kernel tests: a case (geometry + which optional tensors are given),
// its random inputs as floats, and one forward + backward run through the Tensor-level API (any
// device, float32) or through ref<double> on the same values, with every output as doubles.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/rnn/rnn.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::testing {

struct RnnCase {
  RnnGeometry g;
  std::vector<float> lengths;  // empty: every sequence has T steps
  bool h0 = true, c0 = true, bias = true, dy = true, dhT = true, dcT = true;
};

inline RnnGeometry rnn_geometry(RnnCell cell, int64_t T, int64_t N, int64_t C, int64_t H,
                                int64_t layers, bool bidirectional) {
  RnnGeometry g;
  g.cell = cell;
  g.T = T, g.N = N, g.C = C, g.H = H;
  g.layers = layers;
  g.bidirectional = bidirectional;
  return g;
}

// Host values of every input and upstream gradient (empty when absent), per-pass weights and the
// initial values of the weight gradients (random: the backward must add to them).
struct RnnInputs {
  std::vector<float> x, lengths, h0, c0, dy, dhT, dcT;
  std::vector<std::vector<float>> w_ih, w_hh, b_ih, b_hh;
  std::vector<std::vector<float>> dw_ih, dw_hh, db_ih, db_hh;
};

inline RnnInputs random_rnn_inputs(const RnnCase& c, Random& rng) {
  const RnnGeometry& g = c.g;
  const int64_t P = g.passes(), GH = g.gates() * g.H, state = P * g.N * g.H;
  const bool lstm = g.cell == RnnCell::lstm;
  RnnInputs in;
  in.x = random_values(rng, g.T * g.N * g.C);
  in.lengths = c.lengths;
  if (c.h0) in.h0 = random_values(rng, state);
  if (c.c0 && lstm) in.c0 = random_values(rng, state);
  if (c.dy) in.dy = random_values(rng, g.T * g.N * g.directions() * g.H);
  if (c.dhT) in.dhT = random_values(rng, state);
  if (c.dcT && lstm) in.dcT = random_values(rng, state);
  // PyTorch's init range, U(-1/sqrt(H), 1/sqrt(H)), widened so that the gates leave their
  // linear region.
  const double k = 1.5 / std::sqrt(double(g.H));
  for (int64_t p = 0; p < P; ++p) {
    const int64_t Cl = g.input_size(p / g.directions());
    in.w_ih.push_back(random_values(rng, GH * Cl, -k, k));
    in.w_hh.push_back(random_values(rng, GH * g.H, -k, k));
    if (c.bias) {
      in.b_ih.push_back(random_values(rng, GH, -k, k));
      in.b_hh.push_back(random_values(rng, GH, -k, k));
    }
    in.dw_ih.push_back(random_values(rng, GH * Cl));
    in.dw_hh.push_back(random_values(rng, GH * g.H));
    in.db_ih.push_back(random_values(rng, GH));
    in.db_hh.push_back(random_values(rng, GH));
  }
  return in;
}

// Everything one forward + backward produced (weight gradients after accumulation).
struct RnnRun {
  std::vector<double> y, hT, cT, dx, dh0, dc0;
  std::vector<std::vector<double>> dw_ih, dw_hh, db_ih, db_hh;
};

// ref<double> on the inputs' values.
inline RnnRun run_rnn_reference(const RnnGeometry& g, const RnnInputs& in) {
  auto d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  auto ptr = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  const bool lstm = g.cell == RnnCell::lstm;
  const int64_t state = g.passes() * g.N * g.H;
  const std::vector<double> x = d(in.x), len = d(in.lengths), h0 = d(in.h0), c0 = d(in.c0),
                            dy = d(in.dy), dhT = d(in.dhT), dcT = d(in.dcT);
  std::vector<std::vector<double>> w_ih, w_hh, b_ih, b_hh;
  RnnRun r;
  RnnWeights<double> w;
  RnnWeightGrads<double> dw;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    w_ih.push_back(d(in.w_ih[p]));
    w_hh.push_back(d(in.w_hh[p]));
    b_ih.push_back(in.b_ih.empty() ? std::vector<double>() : d(in.b_ih[p]));
    b_hh.push_back(in.b_hh.empty() ? std::vector<double>() : d(in.b_hh[p]));
    r.dw_ih.push_back(d(in.dw_ih[p]));
    r.dw_hh.push_back(d(in.dw_hh[p]));
    r.db_ih.push_back(d(in.db_ih[p]));
    r.db_hh.push_back(d(in.db_hh[p]));
  }
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    w.w_ih.push_back(w_ih[p].data());
    w.w_hh.push_back(w_hh[p].data());
    w.b_ih.push_back(ptr(b_ih[p]));
    w.b_hh.push_back(ptr(b_hh[p]));
    dw.w_ih.push_back(r.dw_ih[p].data());
    dw.w_hh.push_back(r.dw_hh[p].data());
    dw.b_ih.push_back(r.db_ih[p].data());
    dw.b_hh.push_back(r.db_hh[p].data());
  }
  r.y.resize(size_t(g.T * g.N * g.directions() * g.H));
  r.hT.resize(size_t(state));
  if (lstm) r.cT.resize(size_t(state));
  r.dx.resize(x.size());
  r.dh0.resize(size_t(state));
  if (lstm) r.dc0.resize(size_t(state));
  ref::rnn_forward(g, x.data(), ptr(len), ptr(h0), ptr(c0), w, r.y.data(), r.hT.data(),
                   lstm ? r.cT.data() : nullptr);
  ref::rnn_backward(g, x.data(), ptr(len), ptr(h0), ptr(c0), w, ptr(dy), ptr(dhT), ptr(dcT),
                    r.dx.data(), r.dh0.data(), lstm ? r.dc0.data() : nullptr, dw);
  return r;
}

// A float32 tensor on ctx's device holding `values`, or an undefined one when they are empty.
inline Tensor rnn_tensor(Context& ctx, const Shape& shape, const std::vector<float>& values) {
  if (values.empty()) return Tensor();
  Tensor t = ctx.empty(shape);
  ctx.copy(t, Tensor::from_vector(shape, values));
  return t;
}
// A float32 tensor on ctx's device full of NaN: every element must be written.
inline Tensor rnn_poisoned(Context& ctx, const Shape& shape) {
  Tensor t = ctx.empty(shape);
  ctx.fill(t, kNaN);
  return t;
}
inline std::vector<double> rnn_values(const Tensor& t) {
  return t.defined() ? to_double(t.to_vector()) : std::vector<double>();
}

// Every tensor of one forward + backward on ctx's device, float32: the inputs, and the outputs
// (y, hT, cT, dx, dh0, dc0 and the reserve) poisoned with NaN. Tests may replace any of them.
struct RnnTensors {
  Tensor x, lengths, h0, c0, dy, dhT, dcT;
  std::vector<Tensor> w_ih, w_hh, b_ih, b_hh, dw_ih, dw_hh, db_ih, db_hh;
  Tensor y, hT, cT, reserve, dx, dh0, dc0;

  RnnParams params() const {
    RnnParams w;
    for (size_t p = 0; p < w_ih.size(); ++p) {
      w.w_ih.push_back(&w_ih[p]);
      w.w_hh.push_back(&w_hh[p]);
      w.b_ih.push_back(b_ih[p].defined() ? &b_ih[p] : nullptr);
      w.b_hh.push_back(b_hh[p].defined() ? &b_hh[p] : nullptr);
    }
    return w;
  }
  RnnParamGrads grads() {
    RnnParamGrads dw;
    for (size_t p = 0; p < dw_ih.size(); ++p) {
      dw.w_ih.push_back(&dw_ih[p]);
      dw.w_hh.push_back(&dw_hh[p]);
      dw.b_ih.push_back(&db_ih[p]);
      dw.b_hh.push_back(&db_hh[p]);
    }
    return dw;
  }
  void forward(Context& ctx, const RnnGeometry& g) {
    rnn_forward(ctx, g, x, lengths, h0, c0, params(), y, hT, cT, reserve);
  }
  void backward(Context& ctx, const RnnGeometry& g) {
    rnn_backward(ctx, g, x, lengths, h0, c0, params(), y, reserve, dy, dhT, dcT, dx, dh0, dc0,
                 grads());
  }
};

inline RnnTensors rnn_tensors(Context& ctx, const RnnGeometry& g, const RnnInputs& in) {
  const bool lstm = g.cell == RnnCell::lstm;
  const Shape state{g.passes(), g.N, g.H}, seq_out{g.T, g.N, g.directions() * g.H};
  const Shape seq_in{g.T, g.N, g.C};
  const int64_t GH = g.gates() * g.H;
  RnnTensors t;
  t.x = rnn_tensor(ctx, seq_in, in.x);
  t.lengths = rnn_tensor(ctx, {g.N}, in.lengths);
  t.h0 = rnn_tensor(ctx, state, in.h0);
  t.c0 = rnn_tensor(ctx, state, in.c0);
  t.dy = rnn_tensor(ctx, seq_out, in.dy);
  t.dhT = rnn_tensor(ctx, state, in.dhT);
  t.dcT = rnn_tensor(ctx, state, in.dcT);
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    const int64_t Cl = g.input_size(int64_t(p) / g.directions());
    t.w_ih.push_back(rnn_tensor(ctx, {GH, Cl}, in.w_ih[p]));
    t.w_hh.push_back(rnn_tensor(ctx, {GH, g.H}, in.w_hh[p]));
    t.b_ih.push_back(in.b_ih.empty() ? Tensor() : rnn_tensor(ctx, {GH}, in.b_ih[p]));
    t.b_hh.push_back(in.b_hh.empty() ? Tensor() : rnn_tensor(ctx, {GH}, in.b_hh[p]));
    t.dw_ih.push_back(rnn_tensor(ctx, {GH, Cl}, in.dw_ih[p]));
    t.dw_hh.push_back(rnn_tensor(ctx, {GH, g.H}, in.dw_hh[p]));
    t.db_ih.push_back(rnn_tensor(ctx, {GH}, in.db_ih[p]));
    t.db_hh.push_back(rnn_tensor(ctx, {GH}, in.db_hh[p]));
  }
  t.y = rnn_poisoned(ctx, seq_out);
  t.hT = rnn_poisoned(ctx, state);
  if (lstm) t.cT = rnn_poisoned(ctx, state);
  const size_t reserve = rnn_reserve_floats(ctx, g, DType::f32);
  t.reserve = rnn_poisoned(ctx, {std::max<int64_t>(1, int64_t(reserve))});
  t.dx = rnn_poisoned(ctx, seq_in);
  t.dh0 = rnn_poisoned(ctx, state);
  if (lstm) t.dc0 = rnn_poisoned(ctx, state);
  return t;
}

// rnn_forward then rnn_backward through the Tensor-level API on ctx's device, float32.
inline RnnRun run_rnn_tensors(Context& ctx, const RnnGeometry& g, const RnnInputs& in) {
  RnnTensors t = rnn_tensors(ctx, g, in);
  t.forward(ctx, g);
  t.backward(ctx, g);
  ctx.synchronize();
  RnnRun r;
  r.y = rnn_values(t.y);
  r.hT = rnn_values(t.hT);
  r.cT = rnn_values(t.cT);
  r.dx = rnn_values(t.dx);
  r.dh0 = rnn_values(t.dh0);
  r.dc0 = rnn_values(t.dc0);
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    r.dw_ih.push_back(rnn_values(t.dw_ih[p]));
    r.dw_hh.push_back(rnn_values(t.dw_hh[p]));
    r.db_ih.push_back(rnn_values(t.db_ih[p]));
    r.db_hh.push_back(rnn_values(t.db_hh[p]));
  }
  return r;
}

// ||out - ref|| / ||ref|| of two double results (the plain norm when ref is zero).
inline double rnn_rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return 1e300;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Every output of `out` within `tol` relative of `ref`, each named in the failure message.
inline void expect_rnn_close(const RnnRun& out, const RnnRun& ref, double tol) {
  auto check = [tol](const char* name, const std::vector<double>& a, const std::vector<double>& b) {
    EXPECT_LT(rnn_rel_error(a, b), tol) << name;
  };
  check("y", out.y, ref.y);
  check("hT", out.hT, ref.hT);
  check("cT", out.cT, ref.cT);
  check("dx", out.dx, ref.dx);
  check("dh0", out.dh0, ref.dh0);
  check("dc0", out.dc0, ref.dc0);
  for (size_t p = 0; p < ref.dw_ih.size(); ++p) {
    const std::string pass = " of pass " + std::to_string(p);
    check(("dw_ih" + pass).c_str(), out.dw_ih[p], ref.dw_ih[p]);
    check(("dw_hh" + pass).c_str(), out.dw_hh[p], ref.dw_hh[p]);
    check(("db_ih" + pass).c_str(), out.db_ih[p], ref.db_ih[p]);
    check(("db_hh" + pass).c_str(), out.db_hh[p], ref.db_hh[p]);
  }
}

// Every output and gradient of two runs is bitwise the same.
inline void expect_same_bits(const RnnRun& a, const RnnRun& b) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.hT, b.hT);
  EXPECT_EQ(a.cT, b.cT);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dh0, b.dh0);
  EXPECT_EQ(a.dc0, b.dc0);
  EXPECT_EQ(a.dw_ih, b.dw_ih);
  EXPECT_EQ(a.dw_hh, b.dw_hh);
  EXPECT_EQ(a.db_ih, b.db_ih);
  EXPECT_EQ(a.db_hh, b.db_hh);
}

}  // namespace crema::kernels::testing
