// crema bench rnn: every CUDA RNN version (kernels/rnn/rnn.h) on each shape, checked against
// the fast CPU path (cpu::, float) on the same inputs, then timed: the training forward (which
// fills the reserve) and forward + backward (the weight gradients accumulating, as in training).
//
// Shapes: "cell:T50,N64,C512,H512[,L2][,bi]" with cell rnn_tanh | rnn_relu | lstm | gru, L the
// number of layers (1 by default) and bi for bidirectional. The default list is the peer's
// (/work/shared/bench/peer_cudnn.py, scripts/bench/peer_rnn.py): LSTM and GRU at T50 N64 C512
// H512, and the row LSTM of the Fashion-MNIST example (T28 N256 C28 H128).
//
// The check is the largest relative error over y, hT, cT, dx, dh0, dc0 and every weight and bias
// gradient. FLOPs as the peer counts them: 2*T*N*(C_l + H)*G*H per pass forward, 3x that for
// forward + backward. Inputs are not rotated past L2: a training step reuses its weights too.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <sstream>
#include <utility>

#include "apps/bench.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/rnn/rnn.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;
using kernels::RnnCell;
using kernels::RnnGeometry;

constexpr double kTolerance = 1e-4;

constexpr const char* kShapeFormat = "cell:T50,N64,C512,H512[,L2][,bi]";

const std::pair<cuda::RnnVersion, const char*> kVersions[] = {
    {cuda::RnnVersion::per_step_gemm, "per_step_gemm"},
    {cuda::RnnVersion::fused_step, "fused_step"},
};

std::vector<cuda::RnnVersion> versions_to_run(const Options& options) {
  std::vector<cuda::RnnVersion> versions;
  std::string names;
  for (const auto& [v, name] : kVersions) {
    if (options.version.empty() || options.version == name) versions.push_back(v);
    names += std::string(names.empty() ? "" : ", ") + name;
  }
  if (versions.empty()) {
    throw Error("--version '" + options.version + "': no such RNN version (" + names + ")");
  }
  return versions;
}

const char* version_name(cuda::RnnVersion version) {
  for (const auto& [v, name] : kVersions) {
    if (v == version) return name;
  }
  return "?";
}

std::optional<RnnCell> cell_from_name(const std::string& name) {
  for (RnnCell cell : {RnnCell::rnn_tanh, RnnCell::rnn_relu, RnnCell::lstm, RnnCell::gru}) {
    if (name == kernels::rnn_cell_name(cell)) return cell;
  }
  return std::nullopt;
}

struct RnnShape {
  std::string text;
  RnnGeometry g;
};

RnnShape parse_rnn_shape(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return Error("--shape '" + text + "': " + why + " (expected " + kShapeFormat + ")");
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw bad("no cell name before ':'");
  RnnShape shape{text, {}};
  const std::optional<RnnCell> cell = cell_from_name(text.substr(0, colon));
  if (!cell)
    throw bad("unknown cell '" + text.substr(0, colon) + "' (rnn_tanh, rnn_relu, lstm, gru)");
  shape.g.cell = *cell;
  std::stringstream fields(text.substr(colon + 1));
  std::string field;
  while (std::getline(fields, field, ',')) {
    if (field == "bi") {
      shape.g.bidirectional = true;
      continue;
    }
    const bool digits = field.size() >= 2 && field.size() <= 10 &&
                        std::all_of(field.begin() + 1, field.end(), ::isdigit);
    if (!digits) throw bad("cannot read '" + field + "'");
    const int64_t value = std::stoll(field.substr(1));
    if (value < 1) throw bad("'" + field + "' must be at least 1");
    switch (field[0]) {
      case 'T':
        shape.g.T = value;
        break;
      case 'N':
        shape.g.N = value;
        break;
      case 'C':
        shape.g.C = value;
        break;
      case 'H':
        shape.g.H = value;
        break;
      case 'L':
        shape.g.layers = value;
        break;
      default:
        throw bad("unknown size '" + field + "'");
    }
  }
  if (shape.g.T == 0 || shape.g.N == 0 || shape.g.C == 0 || shape.g.H == 0) {
    throw bad("T, N, C and H are all needed");
  }
  return shape;
}

std::vector<RnnShape> default_rnn_shapes() {
  return {parse_rnn_shape("lstm:T50,N64,C512,H512"), parse_rnn_shape("gru:T50,N64,C512,H512"),
          parse_rnn_shape("lstm:T28,N256,C28,H128")};
}

// The host values of one problem, and every output of a run (host copies).
struct Problem {
  RnnGeometry g;
  std::vector<float> x, h0, c0, dy, dhT, dcT;
  std::vector<std::vector<float>> w_ih, w_hh, b_ih, b_hh;

  Problem(const RnnGeometry& geometry, Random& random) : g(geometry) {
    const auto values = [&](int64_t n, double k) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& e : v) e = float(random.uniform(-k, k));
      return v;
    };
    const int64_t state = g.passes() * g.N * g.H, GH = g.gates() * g.H;
    const bool lstm = g.cell == RnnCell::lstm;
    x = values(g.T * g.N * g.C, 1.0);
    h0 = values(state, 1.0);
    if (lstm) c0 = values(state, 1.0);
    dy = values(g.T * g.N * g.directions() * g.H, 1.0);
    dhT = values(state, 1.0);
    if (lstm) dcT = values(state, 1.0);
    const double k = 1.0 / std::sqrt(double(g.H));  // PyTorch's initialization range
    for (int64_t p = 0; p < g.passes(); ++p) {
      w_ih.push_back(values(GH * g.input_size(p / g.directions()), k));
      w_hh.push_back(values(GH * g.H, k));
      b_ih.push_back(values(GH, k));
      b_hh.push_back(values(GH, k));
    }
  }

  double flops_forward() const {
    double flops = 0;
    for (int64_t l = 0; l < g.layers; ++l) {
      flops += 2.0 * double(g.T * g.N) * double(g.input_size(l) + g.H) * double(g.gates() * g.H) *
               double(g.directions());
    }
    return flops;
  }
};

// Output buffers of one run, in one order: y, hT, cT, dx, dh0, dc0, then per pass dW_ih, dW_hh,
// db_ih, db_hh (the weight gradients start at zero).
template <class Buffer>
std::vector<Buffer> output_buffers(const RnnGeometry& g,
                                   const std::function<Buffer(int64_t)>& make) {
  const int64_t state = g.passes() * g.N * g.H, GH = g.gates() * g.H;
  const bool lstm = g.cell == RnnCell::lstm;
  std::vector<Buffer> b;
  b.push_back(make(g.T * g.N * g.directions() * g.H));
  b.push_back(make(state));
  b.push_back(make(lstm ? state : 0));
  b.push_back(make(g.T * g.N * g.C));
  b.push_back(make(state));
  b.push_back(make(lstm ? state : 0));
  for (int64_t p = 0; p < g.passes(); ++p) {
    b.push_back(make(GH * g.input_size(p / g.directions())));
    b.push_back(make(GH * g.H));
    b.push_back(make(GH));
    b.push_back(make(GH));
  }
  return b;
}

template <class T, class Get>
kernels::RnnWeights<float> weights_of(const RnnGeometry& g, const std::vector<T>& in, Get get) {
  kernels::RnnWeights<float> w;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    w.w_ih.push_back(get(in[4 * p]));
    w.w_hh.push_back(get(in[4 * p + 1]));
    w.b_ih.push_back(get(in[4 * p + 2]));
    w.b_hh.push_back(get(in[4 * p + 3]));
  }
  return w;
}

template <class T, class Get>
kernels::RnnWeightGrads<float> grads_of(const RnnGeometry& g, std::vector<T>& out, Get get) {
  kernels::RnnWeightGrads<float> dw;
  for (size_t p = 0; p < size_t(g.passes()); ++p) {
    dw.w_ih.push_back(get(out[6 + 4 * p]));
    dw.w_hh.push_back(get(out[6 + 4 * p + 1]));
    dw.b_ih.push_back(get(out[6 + 4 * p + 2]));
    dw.b_hh.push_back(get(out[6 + 4 * p + 3]));
  }
  return dw;
}

// The weights as one list per pass: w_ih, w_hh, b_ih, b_hh.
std::vector<std::vector<float>> weight_list(const Problem& pr) {
  std::vector<std::vector<float>> list;
  for (size_t p = 0; p < pr.w_ih.size(); ++p) {
    list.push_back(pr.w_ih[p]);
    list.push_back(pr.w_hh[p]);
    list.push_back(pr.b_ih[p]);
    list.push_back(pr.b_hh[p]);
  }
  return list;
}

// The CPU path's forward + backward, as doubles in output_buffers' order.
std::vector<std::vector<double>> cpu_outputs(const Problem& pr, int num_threads) {
  const RnnGeometry& g = pr.g;
  using Host = std::vector<float>;
  std::vector<Host> out = output_buffers<Host>(g, [](int64_t n) { return Host(size_t(n), 0.0f); });
  const std::vector<Host> wl = weight_list(pr);
  const auto in = [](const Host& v) -> const float* { return v.empty() ? nullptr : v.data(); };
  const auto mut = [](Host& v) -> float* { return v.empty() ? nullptr : v.data(); };
  const kernels::RnnWeights<float> w = weights_of(g, wl, in);
  Host reserve(kernels::cpu::rnn_reserve_floats(g)), ws(kernels::cpu::rnn_workspace_floats(g));
  kernels::cpu::rnn_forward(g, pr.x.data(), nullptr, pr.h0.data(), in(pr.c0), w, out[0].data(),
                            out[1].data(), mut(out[2]), reserve.data(), ws.data(), num_threads);
  kernels::cpu::rnn_backward(g, pr.x.data(), nullptr, pr.h0.data(), in(pr.c0), w, out[0].data(),
                             reserve.data(), pr.dy.data(), pr.dhT.data(), in(pr.dcT), out[3].data(),
                             out[4].data(), mut(out[5]), grads_of(g, out, mut), ws.data(),
                             num_threads);
  std::vector<std::vector<double>> result;
  for (const Host& v : out) result.emplace_back(v.begin(), v.end());
  return result;
}

// The device side of one problem for one version.
struct DeviceRun {
  const RnnGeometry& g;
  cuda::RnnVersion version;
  Tensor x, h0, c0, dy, dhT, dcT, reserve, workspace;
  std::vector<Tensor> weights, outputs;

  DeviceRun(Context& ctx, const Problem& pr, cuda::RnnVersion v) : g(pr.g), version(v) {
    const auto upload = [&](const std::vector<float>& values) {
      if (values.empty()) return Tensor();
      Tensor t = ctx.empty({int64_t(values.size())});
      t.copy_from(Tensor::from_vector({int64_t(values.size())}, values));
      return t;
    };
    x = upload(pr.x), h0 = upload(pr.h0), c0 = upload(pr.c0);
    dy = upload(pr.dy), dhT = upload(pr.dhT), dcT = upload(pr.dcT);
    for (const std::vector<float>& w : weight_list(pr)) weights.push_back(upload(w));
    outputs = output_buffers<Tensor>(g, [&](int64_t n) {
      if (n == 0) return Tensor();
      Tensor t = ctx.empty({n});
      ctx.fill(t, NAN);
      return t;
    });
    for (size_t i = 6; i < outputs.size(); ++i) ctx.fill(outputs[i], 0.0f);
    reserve = ctx.empty({std::max<int64_t>(1, int64_t(cuda::rnn_reserve_floats(g, v)))});
    workspace = ctx.empty({std::max<int64_t>(1, int64_t(cuda::rnn_workspace_floats(g, v)))});
  }

  static float* mut(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
  static const float* in(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

  void forward(gpu::Stream stream) {
    cuda::rnn_forward(g, in(x), nullptr, in(h0), in(c0), weights_of(g, weights, in),
                      mut(outputs[0]), mut(outputs[1]), mut(outputs[2]), mut(reserve),
                      mut(workspace), stream, version);
  }
  void backward(gpu::Stream stream) {
    cuda::rnn_backward(g, in(x), nullptr, in(h0), in(c0), weights_of(g, weights, in),
                       in(outputs[0]), in(reserve), in(dy), in(dhT), in(dcT), mut(outputs[3]),
                       mut(outputs[4]), mut(outputs[5]), grads_of(g, outputs, mut), mut(workspace),
                       stream, version);
  }

  // The largest relative error of any output against `expected`.
  double max_error(Context& ctx, const std::vector<std::vector<double>>& expected) {
    ctx.synchronize();
    double worst = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined()) continue;
      const std::vector<float> got = outputs[i].to_vector();
      const double e = relative_error(got.data(), expected[i].data(), got.size());
      if (!(e <= worst)) worst = e;  // NaN sticks
    }
    return worst;
  }
};

}  // namespace

int bench_rnn(Context& ctx, const Options& options, std::ostream& out) {
  if (options.math != "fp32") {
    throw Error("--math " + options.math + ": the RNN kernels compute in fp32 only");
  }
  const std::vector<cuda::RnnVersion> versions = versions_to_run(options);
  std::vector<RnnShape> shapes;
  for (const std::string& text : options.shapes) shapes.push_back(parse_rnn_shape(text));
  if (shapes.empty()) shapes = default_rnn_shapes();

  Table table(out, device_peak(ctx));
  Random random(1);
  for (const RnnShape& shape : shapes) {
    shape.g.validate("crema bench rnn");
    const Problem pr(shape.g, random);
    const std::vector<std::vector<double>> expected = cpu_outputs(pr, ctx.num_threads());
    for (cuda::RnnVersion version : versions) {
      DeviceRun run(ctx, pr, version);
      run.forward(ctx.stream());
      run.backward(ctx.stream());
      const double error = run.max_error(ctx, expected);
      for (const bool backward : {false, true}) {
        Row row;
        row.shape = shape.text;
        row.pass = backward ? "forward+backward" : "forward";
        row.version = version_name(version);
        row.check = "cpu";
        row.rel_error = error;
        row.tolerance = kTolerance;
        row.flops = (backward ? 3.0 : 1.0) * pr.flops_forward();
        row.peak = "fp32";
        row.workspace_bytes = double(cuda::rnn_workspace_floats(shape.g, version) +
                                     cuda::rnn_reserve_floats(shape.g, version)) *
                              sizeof(float);
        if (error <= kTolerance) {
          row.ms = measure_ms(ctx, options, [&](int) {
            run.forward(ctx.stream());
            if (backward) run.backward(ctx.stream());
          });
        }
        table.print(row);
      }
    }
  }
  return table.status();
}

}  // namespace crema::bench
