// RNN, LSTM and GRU against PyTorch (tests/fixtures/make_rnn_fixtures.py): 2 layers,
// bidirectional, 4 sequences of different lengths packed with enforce_sorted=False, given h0
// (and c0), upstream gradients for y, hT (and cT). ref<double> and the fast CPU path reproduce
// torch's outputs and every gradient: x, h0, c0 and each parameter by its PyTorch name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/rnn/rnn.h"
#include "tests/fixtures/rnn_fixture.h"
#include "tests/kernels/rnn_test_util.h"

namespace crema::kernels {
namespace {

using testing::RnnInputs;
using testing::RnnRun;

class RnnFixture : public ::testing::TestWithParam<std::string> {
 protected:
  crema::testing::RnnFixture f;

  std::string key(const std::string& name) const { return GetParam() + "." + name; }

  RnnGeometry geometry() const {
    const std::vector<double> v = f.doubles(key("geometry"));
    RnnGeometry g;
    g.cell = GetParam() == "lstm"  ? RnnCell::lstm
             : GetParam() == "gru" ? RnnCell::gru
                                   : RnnCell::rnn_tanh;
    g.T = int64_t(v[0]), g.N = int64_t(v[1]), g.C = int64_t(v[2]), g.H = int64_t(v[3]);
    g.layers = int64_t(v[4]);
    g.bidirectional = v[5] != 0.0;
    return g;
  }
  // PyTorch's name of pass p's parameter `stem`.
  static std::string param(const RnnGeometry& g, const char* stem, int64_t p) {
    return std::string(stem) + "_l" + std::to_string(p / g.directions()) +
           (p % g.directions() == 1 ? "_reverse" : "");
  }
  std::vector<float> optional(const std::string& name) const {
    return f.has(key(name)) ? f.floats(key(name)) : std::vector<float>();
  }

  // The stored inputs; the weight gradients start at zero (torch's .grad).
  RnnInputs inputs(const RnnGeometry& g) const {
    RnnInputs in;
    in.x = f.floats(key("x"));
    in.lengths = f.floats(key("lengths"));
    in.h0 = f.floats(key("h0"));
    in.c0 = optional("c0");
    in.dy = f.floats(key("dy"));
    in.dhT = f.floats(key("dhT"));
    in.dcT = optional("dcT");
    for (int64_t p = 0; p < g.passes(); ++p) {
      in.w_ih.push_back(f.floats(key(param(g, "weight_ih", p))));
      in.w_hh.push_back(f.floats(key(param(g, "weight_hh", p))));
      in.b_ih.push_back(f.floats(key(param(g, "bias_ih", p))));
      in.b_hh.push_back(f.floats(key(param(g, "bias_hh", p))));
      in.dw_ih.emplace_back(in.w_ih.back().size(), 0.0f);
      in.dw_hh.emplace_back(in.w_hh.back().size(), 0.0f);
      in.db_ih.emplace_back(in.b_ih.back().size(), 0.0f);
      in.db_hh.emplace_back(in.b_hh.back().size(), 0.0f);
    }
    return in;
  }

  RnnRun torch(const RnnGeometry& g) const {
    auto optional_out = [this](const std::string& name) {
      return f.has(key(name)) ? f.doubles(key(name)) : std::vector<double>();
    };
    RnnRun r;
    r.y = f.doubles(key("y"));
    r.hT = f.doubles(key("hT"));
    r.cT = optional_out("cT");
    r.dx = f.doubles(key("dx"));
    r.dh0 = f.doubles(key("dh0"));
    r.dc0 = optional_out("dc0");
    for (int64_t p = 0; p < g.passes(); ++p) {
      r.dw_ih.push_back(f.doubles(key("grad." + param(g, "weight_ih", p))));
      r.dw_hh.push_back(f.doubles(key("grad." + param(g, "weight_hh", p))));
      r.db_ih.push_back(f.doubles(key("grad." + param(g, "bias_ih", p))));
      r.db_hh.push_back(f.doubles(key("grad." + param(g, "bias_hh", p))));
    }
    return r;
  }
};

TEST_P(RnnFixture, ReferenceMatchesPyTorch) {
  const RnnGeometry g = geometry();
  const RnnRun expected = torch(g);
  ASSERT_EQ(expected.cT.empty(), g.cell != RnnCell::lstm);
  testing::expect_rnn_close(testing::run_rnn_reference(g, inputs(g)), expected, 1e-12);
}

TEST_P(RnnFixture, CpuMatchesPyTorch) {
  const RnnGeometry g = geometry();
  Context ctx(Device::cpu(), 1, 2);
  testing::expect_rnn_close(testing::run_rnn_tensors(ctx, g, inputs(g)), torch(g), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnFixture, ::testing::Values("lstm", "gru", "rnn_tanh"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace crema::kernels
