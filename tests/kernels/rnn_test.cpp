// RNN, LSTM and GRU on the CPU: ref<double>'s backward against central differences of its own
// forward for every cell and option (layers, directions, lengths, initial states, absent
// upstream gradients and biases), the fast float32 path against ref<double> on awkward shapes
// (outputs poisoned with NaN, weight gradients accumulating onto random values), thread-count
// independence, and the dispatch's errors. rnn_fixture_test.cpp checks both against PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "kernels/rnn/rnn.h"
#include "tests/kernels/rnn_test_util.h"

namespace crema::kernels {
namespace {

using testing::rnn_geometry;
using testing::RnnCase;
using testing::RnnInputs;
using testing::RnnRun;

const RnnCell kCells[] = {RnnCell::rnn_tanh, RnnCell::rnn_relu, RnnCell::lstm, RnnCell::gru};

std::string cell_param_name(const ::testing::TestParamInfo<RnnCell>& info) {
  return rnn_cell_name(info.param);
}

// ---- ref<double> against finite differences ----

// The three option sets of the gradient check, small enough to difference every input.
RnnCase gradient_case(RnnCell cell, int which) {
  RnnCase c;
  if (which == 0) {  // stacked, bidirectional, mixed lengths, everything given
    c.g = rnn_geometry(cell, 4, 3, 3, 3, 2, true);
    c.lengths = {4, 2, 1};
  } else if (which == 1) {  // one layer, full length, no h0/c0, no bias, only dy
    c.g = rnn_geometry(cell, 3, 2, 3, 2, 1, false);
    c.h0 = c.c0 = c.bias = c.dhT = c.dcT = false;
  } else {  // only the final states' gradients (no dy), h0 without c0
    c.g = rnn_geometry(cell, 5, 3, 3, 4, 1, true);
    c.lengths = {5, 2, 1};
    c.c0 = c.dy = false;
  }
  return c;
}

// Every input of the reference as doubles, and its pointers.
struct DoubleInputs {
  std::vector<double> x, lengths, h0, c0, dy, dhT, dcT;
  std::vector<std::vector<double>> w_ih, w_hh, b_ih, b_hh;

  explicit DoubleInputs(const RnnInputs& in) {
    auto d = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    x = d(in.x), lengths = d(in.lengths), h0 = d(in.h0), c0 = d(in.c0);
    dy = d(in.dy), dhT = d(in.dhT), dcT = d(in.dcT);
    for (size_t p = 0; p < in.w_ih.size(); ++p) {
      w_ih.push_back(d(in.w_ih[p]));
      w_hh.push_back(d(in.w_hh[p]));
      b_ih.push_back(in.b_ih.empty() ? std::vector<double>() : d(in.b_ih[p]));
      b_hh.push_back(in.b_hh.empty() ? std::vector<double>() : d(in.b_hh[p]));
    }
  }
  static const double* ptr(const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); }
  RnnWeights<double> weights() const {
    RnnWeights<double> w;
    for (size_t p = 0; p < w_ih.size(); ++p) {
      w.w_ih.push_back(w_ih[p].data());
      w.w_hh.push_back(w_hh[p].data());
      w.b_ih.push_back(ptr(b_ih[p]));
      w.b_hh.push_back(ptr(b_hh[p]));
    }
    return w;
  }
  // Every differentiable input, named.
  std::vector<std::pair<std::string, std::vector<double>*>> differentiable() {
    std::vector<std::pair<std::string, std::vector<double>*>> list = {
        {"x", &x}, {"h0", &h0}, {"c0", &c0}};
    for (size_t p = 0; p < w_ih.size(); ++p) {
      const std::string s = std::to_string(p);
      list.push_back({"w_ih" + s, &w_ih[p]});
      list.push_back({"w_hh" + s, &w_hh[p]});
      list.push_back({"b_ih" + s, &b_ih[p]});
      list.push_back({"b_hh" + s, &b_hh[p]});
    }
    return list;
  }
};

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// The objective whose gradient the backward computes: sum y dy + sum hT dhT + sum cT dcT.
double objective(const RnnGeometry& g, const DoubleInputs& in) {
  const size_t state = size_t(g.passes() * g.N * g.H);
  std::vector<double> y(size_t(g.T * g.N * g.directions() * g.H)), hT(state), cT(state);
  ref::rnn_forward(g, in.x.data(), DoubleInputs::ptr(in.lengths), DoubleInputs::ptr(in.h0),
                   DoubleInputs::ptr(in.c0), in.weights(), y.data(), hT.data(), cT.data());
  return dot(y, in.dy) + dot(hT, in.dhT) + (g.cell == RnnCell::lstm ? dot(cT, in.dcT) : 0.0);
}

class RnnGradientCheck : public ::testing::TestWithParam<std::tuple<RnnCell, int>> {};

TEST_P(RnnGradientCheck, ReferenceBackwardMatchesFiniteDifferences) {
  const RnnCase c = gradient_case(std::get<0>(GetParam()), std::get<1>(GetParam()));
  const RnnGeometry& g = c.g;
  Random rng(91 + uint64_t(std::get<1>(GetParam())));
  const RnnInputs in = testing::random_rnn_inputs(c, rng);
  const RnnRun run = testing::run_rnn_reference(g, in);

  // Outputs past each sequence's length are exactly zero, the others are not (relu's may be).
  const int64_t DH = g.directions() * g.H;
  const bool relu = g.cell == RnnCell::rnn_relu;
  for (int64_t t = 0; t < g.T; ++t) {
    for (int64_t n = 0; n < g.N; ++n) {
      const bool active = c.lengths.empty() || t < int64_t(c.lengths[size_t(n)]);
      for (int64_t j = 0; j < DH; ++j) {
        const double v = run.y[size_t((t * g.N + n) * DH + j)];
        EXPECT_TRUE(active ? relu || v != 0.0 : v == 0.0)
            << "y[" << t << ", " << n << ", " << j << "]";
      }
    }
  }

  // The analytic gradient of each input: dx, dh0, dc0 as written, the weight gradients as the
  // amounts added to their random initial values.
  std::map<std::string, std::vector<double>> analytic = {
      {"x", run.dx}, {"h0", run.dh0}, {"c0", run.dc0}};
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    const std::string s = std::to_string(p);
    auto added = [](const std::vector<double>& after, const std::vector<float>& before) {
      std::vector<double> d(after.size());
      for (size_t i = 0; i < d.size(); ++i) d[i] = after[i] - double(before[i]);
      return d;
    };
    analytic["w_ih" + s] = added(run.dw_ih[p], in.dw_ih[p]);
    analytic["w_hh" + s] = added(run.dw_hh[p], in.dw_hh[p]);
    analytic["b_ih" + s] = added(run.db_ih[p], in.db_ih[p]);
    analytic["b_hh" + s] = added(run.db_hh[p], in.db_hh[p]);
  }

  DoubleInputs din(in);
  const double eps = 1e-5;
  for (auto& [name, values] : din.differentiable()) {
    if (values->empty()) continue;  // absent: no gradient to check
    std::vector<double> numeric(values->size());
    for (size_t i = 0; i < values->size(); ++i) {
      const double saved = (*values)[i];
      (*values)[i] = saved + eps;
      const double plus = objective(g, din);
      (*values)[i] = saved - eps;
      const double minus = objective(g, din);
      (*values)[i] = saved;
      numeric[i] = (plus - minus) / (2 * eps);
    }
    EXPECT_LT(testing::rnn_rel_error(analytic[name], numeric), 1e-7) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnGradientCheck,
                         ::testing::Combine(::testing::ValuesIn(kCells),
                                            ::testing::Values(0, 1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<RnnCell, int>>& info) {
                           return std::string(rnn_cell_name(std::get<0>(info.param))) + "_case" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- the fast path against ref<double> ----

// Awkward shapes: odd C and H, N = 1, T = 1, three layers (both workspace buffers), mixed
// lengths (in the first case none reaches T), absent optional tensors (h0, c0, biases, dy, dhT,
// dcT).
std::vector<RnnCase> awkward_cases(RnnCell cell) {
  std::vector<RnnCase> cases(3);
  cases[0].g = rnn_geometry(cell, 5, 3, 5, 7, 2, true);
  cases[0].lengths = {4, 2, 1};
  cases[1].g = rnn_geometry(cell, 1, 1, 3, 5, 1, false);
  cases[1].h0 = cases[1].c0 = cases[1].bias = cases[1].dy = false;
  cases[2].g = rnn_geometry(cell, 6, 4, 9, 33, 3, true);
  cases[2].lengths = {6, 3, 6, 1};
  cases[2].c0 = cases[2].dhT = cases[2].dcT = false;
  return cases;
}

// Enough rows per step (N*G*H >= 8192) for the gate loops to go parallel.
RnnCase wide_case(RnnCell cell) {
  RnnCase c;
  c.g = rnn_geometry(cell, 2, 40, 5, 210, 1, false);
  c.lengths = std::vector<float>(40, 2.0f);
  for (size_t n = 0; n < 40; n += 3) c.lengths[n] = 1.0f;
  return c;
}

class RnnCpu : public ::testing::TestWithParam<RnnCell> {};

TEST_P(RnnCpu, MatchesReferenceOnAwkwardShapes) {
  std::vector<RnnCase> cases = awkward_cases(GetParam());
  cases.push_back(wide_case(GetParam()));
  Random rng(7);
  for (const RnnCase& c : cases) {
    SCOPED_TRACE("T=" + std::to_string(c.g.T) + " N=" + std::to_string(c.g.N) +
                 " C=" + std::to_string(c.g.C) + " H=" + std::to_string(c.g.H) +
                 " layers=" + std::to_string(c.g.layers));
    const RnnInputs in = testing::random_rnn_inputs(c, rng);
    Context ctx(Device::cpu(), 1, 2);
    // Scratch starts as NaN: nothing may be read before it is written.
    const size_t ws = cpu::rnn_workspace_floats(c.g);
    std::fill_n(ctx.workspace(ws), ws, testing::kNaN);
    testing::expect_rnn_close(testing::run_rnn_tensors(ctx, c.g, in),
                              testing::run_rnn_reference(c.g, in), 1e-5);
  }
}

TEST_P(RnnCpu, ResultsDoNotDependOnTheThreadCount) {
  const RnnCase c = wide_case(GetParam());
  Random rng(11);
  const RnnInputs in = testing::random_rnn_inputs(c, rng);
  Context one(Device::cpu(), 1, 1), two(Device::cpu(), 1, 2);
  const RnnRun a = testing::run_rnn_tensors(one, c.g, in);
  const RnnRun b = testing::run_rnn_tensors(two, c.g, in);
  testing::expect_same_bits(a, b);
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnCpu, ::testing::ValuesIn(kCells), cell_param_name);

// ref<float> (what a float32 oracle would call) agrees with ref<double>.
TEST(RnnReference, FloatInstantiationMatchesDouble) {
  RnnCase c;
  c.g = rnn_geometry(RnnCell::lstm, 4, 3, 5, 6, 2, true);
  c.lengths = {4, 1, 3};
  Random rng(3);
  const RnnInputs in = testing::random_rnn_inputs(c, rng);
  const RnnRun expected = testing::run_rnn_reference(c.g, in);
  const RnnGeometry& g = c.g;
  std::vector<float> y(size_t(g.T * g.N * 2 * g.H), testing::kNaN);
  std::vector<float> hT(size_t(g.passes() * g.N * g.H), testing::kNaN), cT = hT;
  RnnWeights<float> w;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    w.w_ih.push_back(in.w_ih[p].data());
    w.w_hh.push_back(in.w_hh[p].data());
    w.b_ih.push_back(in.b_ih[p].data());
    w.b_hh.push_back(in.b_hh[p].data());
  }
  ref::rnn_forward(g, in.x.data(), in.lengths.data(), in.h0.data(), in.c0.data(), w, y.data(),
                   hT.data(), cT.data());
  EXPECT_LT(testing::rel_error(y, expected.y), 1e-6);
  EXPECT_LT(testing::rel_error(hT, expected.hT), 1e-6);
  EXPECT_LT(testing::rel_error(cT, expected.cT), 1e-6);
}

// ---- float64 through the Tensor-level API runs the reference ----

Tensor to_f64(const Tensor& t) {
  if (!t.defined()) return Tensor();
  Tensor d(t.shape(), DType::f64);
  const std::vector<float> v = t.to_vector();
  std::copy(v.begin(), v.end(), d.data<double>());
  return d;
}
std::vector<double> f64_values(const Tensor& t) {
  return t.defined() ? std::vector<double>(t.data<double>(), t.data<double>() + t.numel())
                     : std::vector<double>();
}

TEST(RnnDispatch, Float64RunsTheReference) {
  RnnCase c;
  c.g = rnn_geometry(RnnCell::gru, 4, 3, 5, 3, 2, true);
  c.lengths = {2, 4, 1};
  Random rng(13);
  const RnnInputs in = testing::random_rnn_inputs(c, rng);
  Context ctx(Device::cpu(), 1, 1);
  testing::RnnTensors t = testing::rnn_tensors(ctx, c.g, in);
  for (Tensor* x : {&t.x, &t.lengths, &t.h0, &t.c0, &t.dy, &t.dhT, &t.dcT, &t.y, &t.hT, &t.cT,
                    &t.dx, &t.dh0, &t.dc0}) {
    *x = to_f64(*x);
  }
  for (auto* list : {&t.w_ih, &t.w_hh, &t.b_ih, &t.b_hh, &t.dw_ih, &t.dw_hh, &t.db_ih, &t.db_hh}) {
    for (Tensor& x : *list) x = to_f64(x);
  }
  t.reserve = Tensor();
  t.forward(ctx, c.g);
  t.backward(ctx, c.g);
  const RnnRun expected = testing::run_rnn_reference(c.g, in);
  EXPECT_EQ(f64_values(t.y), expected.y);
  EXPECT_EQ(f64_values(t.hT), expected.hT);
  EXPECT_EQ(f64_values(t.dx), expected.dx);
  EXPECT_EQ(f64_values(t.dh0), expected.dh0);
  for (size_t p = 0; p < size_t(c.g.passes()); ++p) {
    EXPECT_EQ(f64_values(t.dw_ih[p]), expected.dw_ih[p]);
    EXPECT_EQ(f64_values(t.dw_hh[p]), expected.dw_hh[p]);
    EXPECT_EQ(f64_values(t.db_ih[p]), expected.db_ih[p]);
    EXPECT_EQ(f64_values(t.db_hh[p]), expected.db_hh[p]);
  }
}

// ---- the dispatch's errors ----

class RnnErrors : public ::testing::Test {
 protected:
  RnnErrors() : ctx(Device::cpu(), 1, 1) {
    c.g = rnn_geometry(RnnCell::lstm, 3, 2, 3, 2, 2, true);
    c.lengths = {3, 2};
    Random rng(5);
    good = testing::rnn_tensors(ctx, c.g, testing::random_rnn_inputs(c, rng));
  }

  // forward (or backward) on `t` throws crema::Error with every one of `parts` in its message.
  void expect_error(testing::RnnTensors t, bool backward, std::initializer_list<std::string> parts,
                    const RnnGeometry* g = nullptr) {
    const RnnGeometry& geometry = g ? *g : c.g;
    try {
      if (backward) {
        t.backward(ctx, geometry);
      } else {
        t.forward(ctx, geometry);
      }
      ADD_FAILURE() << "no error; expected one naming " << *parts.begin();
    } catch (const Error& e) {
      for (const std::string& part : parts) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "'" << e.what() << "' does not say '" << part << "'";
      }
    }
  }

  Context ctx;
  RnnCase c;
  testing::RnnTensors good;
};

TEST_F(RnnErrors, ValidTensorsRun) {
  testing::RnnTensors t = good;
  EXPECT_NO_THROW(t.forward(ctx, c.g));
  EXPECT_NO_THROW(t.backward(ctx, c.g));
}

TEST_F(RnnErrors, WrongShapesNameTheTensor) {
  auto with = [this](const std::function<void(testing::RnnTensors&)>& change) {
    testing::RnnTensors t = good;
    change(t);
    return t;
  };
  expect_error(with([&](auto& t) {
                 t.x = ctx.empty({3, 2});
               }),
               false, {"rnn_forward", "x is f32[3, 2]", "expected f32[3, 2, 3]"});
  expect_error(with([&](auto& t) { t.h0 = ctx.empty({4, 2, 3}); }), false, {"h0"});
  expect_error(with([&](auto& t) { t.c0 = ctx.empty({2, 2, 2}); }), true, {"rnn_backward", "c0"});
  expect_error(with([&](auto& t) {
                 t.w_ih[3] = ctx.empty({8, 3});
               }),
               false, {"weight_ih_l1_reverse", "expected f32[8, 4]"});
  expect_error(with([&](auto& t) { t.w_hh[0] = Tensor(); }), false, {"weight_hh_l0 is undefined"});
  expect_error(with([&](auto& t) { t.b_hh[2] = ctx.empty({7}); }), false, {"bias_hh_l1"});
  expect_error(with([&](auto& t) { t.y = ctx.empty({3, 2, 2}); }), false, {"y is"});
  expect_error(with([&](auto& t) { t.hT = ctx.empty({4, 2}); }), false, {"hT"});
  expect_error(with([&](auto& t) { t.reserve = ctx.empty({3}); }), false, {"reserve"});
  expect_error(with([&](auto& t) { t.reserve = ctx.empty({3}); }), true, {"reserve"});
  expect_error(with([&](auto& t) { t.dy = ctx.empty({3, 2, 2}); }), true, {"dy"});
  expect_error(with([&](auto& t) { t.dcT = ctx.empty({4, 2, 3}); }), true, {"dcT"});
  expect_error(with([&](auto& t) { t.dx = ctx.empty({3, 2, 4}); }), true, {"dx"});
  expect_error(with([&](auto& t) {
                 t.dw_hh[1] = ctx.empty({8, 3});
               }),
               true, {"weight_hh_l0_reverse"});
  expect_error(with([&](auto& t) { t.db_ih[0] = ctx.empty({8, 1}); }), true, {"bias_ih_l0"});
  expect_error(with([&](auto& t) {
                 t.h0 = ctx.empty({4, 2, 2}, DType::f64);
               }),
               false, {"h0 is f64"});
  expect_error(with([&](auto& t) { t.w_ih.pop_back(); }), false,
               {"3 weight_ih tensors for 4 passes"});
}

TEST_F(RnnErrors, BadLengthsNameTheEntry) {
  for (float bad : {4.0f, 0.0f, 2.5f, -1.0f, testing::kNaN}) {
    testing::RnnTensors t = good;
    t.lengths = Tensor::from_vector({2}, {3.0f, bad});
    expect_error(t, false, {"rnn_forward", "lengths[1]", "[1, 3]"});
    expect_error(t, true, {"rnn_backward", "lengths[1]"});
  }
  testing::RnnTensors t = good;
  t.lengths = Tensor::from_vector({3}, {3.0f, 3.0f, 3.0f});
  expect_error(t, false, {"lengths is f32[3]"});
}

TEST_F(RnnErrors, BadGeometry) {
  RnnGeometry g = c.g;
  g.H = 0;
  expect_error(good, false, {"rnn_forward", "hidden size H", "got 0"}, &g);
  g = c.g;
  g.layers = 0;
  expect_error(good, true, {"rnn_backward", "layers"}, &g);
  g = c.g;
  g.T = -2;
  expect_error(good, false, {"steps T", "-2"}, &g);
}

TEST_F(RnnErrors, CellStateOnlyForLstm) {
  RnnCase gru = c;
  gru.g.cell = RnnCell::gru;
  Random rng(5);
  testing::RnnTensors t = testing::rnn_tensors(ctx, gru.g, testing::random_rnn_inputs(gru, rng));
  t.c0 = ctx.empty({4, 2, 2});
  expect_error(t, false, {"c0", "gru has no cell state"}, &gru.g);
  t.c0 = Tensor();
  t.cT = ctx.empty({4, 2, 2});
  expect_error(t, false, {"cT"}, &gru.g);
}

}  // namespace
}  // namespace crema::kernels
