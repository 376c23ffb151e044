// crema bench conv: every record of the convolution ladder (kernels/convolution/algorithm.h:
// conv_ladder(), production's and the ladder's) on each shape and pass it implements: checked,
// then timed over input copies rotated past L2.
// --math tf32 or bf16 runs only the records that compute in that math (computes_in; the
// others compute in fp32 whatever the math, so their fp32 rows stand for them), checked within
// conv_find_tolerance(math) (tf32 2e-3, bf16 1e-2) of the same fp32/double reference.
//
// The check: shapes whose pass costs at most kCpuCheckFlops compare every output with the CPU
// path (im2col + the CPU SGEMM, fp32) on the same inputs ("cpu"); larger ones compare kSamples
// outputs computed in double on the host from the definition ("sampled2048"). Forward and data
// outputs are poisoned with NaN first (an element never written fails); the filter gradient
// accumulates, so it starts from zeros.
//
// --layout nhwc times the raw NHWC passes (cuda::conv2d_*_nhwc) on NHWC tensors and KRSC filters,
// without the layout transforms that v9 (nhwc_implicit_gemm) adds for NCHW callers: the number to
// hold against cuDNN on channels_last tensors. The inputs are the same values transposed on the
// host, and the output is transposed back to NCHW / KCRS before the same check. Depthwise
// geometries there run the direct kernel: a row for every version that takes the geometry
// (depthwise_nhwc_v1, _v2, ...; production's, marked '*', last), %peak of DRAM's bandwidth;
// --version depthwise_nhwc_v2 keeps that version's rows only.
// `--shape depthwise` stands for the depthwise layers of MobileNetV2, EfficientNet-B0 and
// ConvNeXt-T at batch 64 (bench_shapes.cpp).
//
// After the table (nchw), a blank line, then one line per shape and pass naming the version
// `auto` runs (kernels::get_conv_algorithm in the command's math, no workspace limit):
// "auto: fwd implicit_gemm 16,3,224,224,64,7,s2,p3". Outside the table, so the rows keep their
// version names (reproduce_tables.py and compare_cudnn.py key on them) and their columns;
// scripts/bench/conv_suite.py reads these lines.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <thread>

#include "apps/bench.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/select.h"
#include "kernels/layout/layout.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;
using kernels::Conv2dGeometry;
using kernels::ConvPass;

constexpr double kCpuCheckFlops = 4e10;
constexpr int kSamples = 2048;
constexpr double kTolerance = 1e-4;
constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

// The name the peer benchmark prints for a pass.
const char* peer_pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward:
      return "fwd";
    case ConvPass::backward_data:
      return "dgrad";
    case ConvPass::backward_filter:
      return "wgrad";
  }
  return "?";
}

std::vector<float> random_values(int64_t n, Random& random) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(random.uniform(-1.0, 1.0));
  return v;
}

// The host tensors of one shape, NCHW / KCRS as in convolution.h.
struct HostTensors {
  const Conv2dGeometry& g;
  int64_t Cg, P, Q;
  std::vector<float> x, w, dy;

  HostTensors(const Conv2dGeometry& geometry, Random& random)
      : g(geometry), Cg(g.C / g.groups), P(g.P()), Q(g.Q()) {
    x = random_values(g.N * g.C * g.H * g.W, random);
    w = random_values(g.K * Cg * g.R * g.S, random);
    dy = random_values(g.N * g.K * P * Q, random);
  }
  double xv(int64_t n, int64_t c, int64_t i, int64_t j) const {
    if (i < 0 || i >= g.H || j < 0 || j >= g.W) return 0;
    return x[size_t(((n * g.C + c) * g.H + i) * g.W + j)];
  }
  double wv(int64_t k, int64_t c, int64_t r, int64_t s) const {
    return w[size_t(((k * Cg + c) * g.R + r) * g.S + s)];
  }
  double dyv(int64_t n, int64_t k, int64_t p, int64_t q) const {
    return dy[size_t(((n * g.K + k) * P + p) * Q + q)];
  }

  // One output element of `pass` in double, from the definitions (index into the output).
  double exact(ConvPass pass, int64_t index) const {
    const int64_t Kg = g.K / g.groups;
    double sum = 0;
    switch (pass) {
      case ConvPass::forward: {  // y[n,k,p,q]
        const int64_t q = index % Q, p = index / Q % P, k = index / (P * Q) % g.K,
                      n = index / (P * Q * g.K), c0 = k / Kg * Cg;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s)
              sum += wv(k, c, r, s) * xv(n, c0 + c, p * g.stride_h - g.pad_h + r * g.dilation_h,
                                         q * g.stride_w - g.pad_w + s * g.dilation_w);
        return sum;
      }
      case ConvPass::backward_data: {  // dx[n,c,h,w]: every (k, r, s) whose tap lands on (h, w)
        const int64_t j = index % g.W, i = index / g.W % g.H, c = index / (g.H * g.W) % g.C,
                      n = index / (g.H * g.W * g.C), group = c / Cg;
        for (int64_t k = group * Kg; k < (group + 1) * Kg; ++k)
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t ph = i + g.pad_h - r * g.dilation_h,
                            qw = j + g.pad_w - s * g.dilation_w;
              if (ph < 0 || qw < 0 || ph % g.stride_h || qw % g.stride_w) continue;
              const int64_t p = ph / g.stride_h, q = qw / g.stride_w;
              if (p < P && q < Q) sum += dyv(n, k, p, q) * wv(k, c - group * Cg, r, s);
            }
        return sum;
      }
      case ConvPass::backward_filter: {  // dw[k,c,r,s]
        const int64_t s = index % g.S, r = index / g.S % g.R, c = index / (g.S * g.R) % Cg,
                      k = index / (g.S * g.R * Cg), c_in = k / Kg * Cg + c;
        for (int64_t n = 0; n < g.N; ++n)
          for (int64_t p = 0; p < P; ++p)
            for (int64_t q = 0; q < Q; ++q)
              sum += dyv(n, k, p, q) * xv(n, c_in, p * g.stride_h - g.pad_h + r * g.dilation_h,
                                          q * g.stride_w - g.pad_w + s * g.dilation_w);
        return sum;
      }
    }
    return 0;
  }
};

// What the pass's output should be where the check looks.
struct Reference {
  std::string kind;
  std::vector<int64_t> where;  // empty: every element
  std::vector<double> values;
};

Reference reference(const HostTensors& t, ConvPass pass, int64_t out_size, double flops,
                    Random& random) {
  const Conv2dGeometry& g = t.g;
  Reference ref;
  if (flops > kCpuCheckFlops) {
    ref.kind = "sampled" + std::to_string(kSamples);
    for (int i = 0; i < kSamples; ++i) {
      ref.where.push_back(int64_t(random.below(uint64_t(out_size))));
      ref.values.push_back(t.exact(pass, ref.where.back()));
    }
    return ref;
  }
  ref.kind = "cpu";
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> out(size_t(out_size), 0.0f), workspace;
  switch (pass) {
    case ConvPass::forward:
      workspace.resize(kernels::cpu::conv2d_forward_workspace(g, threads));
      kernels::cpu::conv2d_forward(g, t.x.data(), t.w.data(), nullptr, out.data(), workspace.data(),
                                   threads);
      break;
    case ConvPass::backward_data:
      workspace.resize(kernels::cpu::conv2d_backward_data_workspace(g, threads));
      kernels::cpu::conv2d_backward_data(g, t.dy.data(), t.w.data(), out.data(), workspace.data(),
                                         threads);
      break;
    case ConvPass::backward_filter:
      workspace.resize(kernels::cpu::conv2d_backward_filter_workspace(g, threads));
      kernels::cpu::conv2d_backward_filter(g, t.x.data(), t.dy.data(), out.data(), workspace.data(),
                                           threads);
      break;
  }
  ref.values.assign(out.begin(), out.end());
  return ref;
}

double check(const std::vector<float>& out, const Reference& ref) {
  if (std::any_of(out.begin(), out.end(), [](float v) { return std::isnan(v); })) return NAN;
  if (ref.where.empty()) return relative_error(out.data(), ref.values.data(), out.size());
  std::vector<float> picked;
  for (int64_t index : ref.where) picked.push_back(out[size_t(index)]);
  return relative_error(picked.data(), ref.values.data(), picked.size());
}

// The device tensors of one pass: `copies` sets of (in0, in1, out), rotated by call.
struct DevicePass {
  ConvPass pass;
  const Conv2dGeometry& g;
  std::vector<Tensor> in0, in1, out;  // forward: x, w, y; data: dy, w, dx; filter: x, dy, dw
  Tensor workspace;

  DevicePass(ConvPass p, const Conv2dGeometry& geometry) : pass(p), g(geometry) {}

  void launch(int call, const kernels::ConvAlgorithm& algorithm, cuda::GemmMath math,
              gpu::Stream stream) {
    const size_t i = size_t(call) % in0.size();
    float* ws = workspace.data<float>();
    switch (pass) {
      case ConvPass::forward:
        return algorithm.forward(g, in0[i].data<float>(), in1[i].data<float>(), nullptr,
                                 out[i].data<float>(), ws, stream, math);
      case ConvPass::backward_data:
        return algorithm.backward_data(g, in0[i].data<float>(), in1[i].data<float>(),
                                       out[i].data<float>(), ws, stream, math);
      case ConvPass::backward_filter:
        return algorithm.backward_filter(g, in0[i].data<float>(), in1[i].data<float>(),
                                         out[i].data<float>(), nullptr, ws, stream, math);
    }
  }
};

// [B, R, S] -> [B, S, R] on the host.
std::vector<float> transposed(int64_t B, int64_t R, int64_t S, const std::vector<float>& v) {
  std::vector<float> t(v.size());
  kernels::ref::batched_transpose<float>(B, R, S, v.data(), t.data());
  return t;
}

namespace dw = cuda::depthwise_nhwc;

dw::Pass depthwise_pass(ConvPass pass) {
  return pass == ConvPass::forward         ? dw::Pass::forward
         : pass == ConvPass::backward_data ? dw::Pass::data
                                           : dw::Pass::filter;
}

// One pass of the raw NHWC entry points, checked against `ref` (NCHW) and timed. Depthwise
// geometries: the direct kernel's `version` (its own entry points), `production` marking
// choose()'s.
Row nhwc_row(Context& ctx, const Options& options, const ConvShape& shape, const HostTensors& host,
             ConvPass pass, const Reference& ref, cuda::GemmMath math,
             dw::Version version = dw::Version::best, bool production = true) {
  const Conv2dGeometry& g = shape.g;
  const int64_t HW = g.H * g.W, PQ = host.P * host.Q, RS = g.R * g.S;
  const std::vector<float> x = transposed(g.N, g.C, HW, host.x);      // [N, H, W, C]
  const std::vector<float> w = transposed(g.K, host.Cg, RS, host.w);  // [K, R, S, Cg]
  const std::vector<float> dy = transposed(g.N, g.K, PQ, host.dy);    // [N, P, Q, K]
  const std::vector<float>& in0 = pass == ConvPass::backward_data ? dy : x;
  const std::vector<float>& in1 = pass == ConvPass::backward_filter ? dy : w;
  const int64_t out_size = pass == ConvPass::forward         ? g.N * PQ * g.K
                           : pass == ConvPass::backward_data ? g.N * HW * g.C
                                                             : g.K * RS * host.Cg;
  const size_t ws = pass == ConvPass::forward ? cuda::conv2d_forward_nhwc_workspace(g)
                    : pass == ConvPass::backward_data
                        ? cuda::conv2d_backward_data_nhwc_workspace(g)
                        : cuda::conv2d_backward_filter_nhwc_workspace(g);
  Row row;
  row.shape = shape.name;
  row.pass = peer_pass_name(pass);
  // Depthwise geometries run the direct kernel (fp32 in every math, memory-bound: DRAM's peak).
  row.version = g.depthwise() ? depthwise_row_name("depthwise_nhwc", version, production) : "nhwc";
  row.check = ref.kind;
  row.tolerance = math == cuda::GemmMath::fp32 ? kTolerance : kernels::conv_find_tolerance(math);
  row.flops = 2.0 * double(g.N * g.K * PQ) * double(host.Cg * RS);
  row.bytes = double(x.size() + w.size() + dy.size()) * sizeof(float);
  row.peak = g.depthwise() ? "dram" : options.math;
  row.workspace_bytes = double(ws * sizeof(float));
  std::vector<Tensor> d_in0, d_in1, d_out;
  const Tensor host_in0 = Tensor::from_vector({int64_t(in0.size())}, in0);
  const Tensor host_in1 = Tensor::from_vector({int64_t(in1.size())}, in1);
  for (int i = 0; i < rotation_copies(size_t(row.bytes)); ++i) {
    d_in0.push_back(ctx.empty({int64_t(in0.size())}));
    d_in1.push_back(ctx.empty({int64_t(in1.size())}));
    d_out.push_back(ctx.empty({out_size}));
    d_in0.back().copy_from(host_in0);
    d_in1.back().copy_from(host_in1);
  }
  Tensor workspace = ctx.empty({int64_t(std::max<size_t>(ws, 1))});
  auto launch = [&](int call) {
    const size_t i = size_t(call) % d_in0.size();
    const float *a = d_in0[i].data<float>(), *b = d_in1[i].data<float>();
    float *out = d_out[i].data<float>(), *space = workspace.data<float>();
    if (g.depthwise()) {
      const dw::Element f32 = dw::Element::f32;
      switch (pass) {
        case ConvPass::forward:
          return dw::forward(g, f32, a, b, out, {}, space, ctx.stream(), version);
        case ConvPass::backward_data:
          return dw::backward_data(g, f32, a, b, out, ctx.stream(), version);
        case ConvPass::backward_filter:
          return dw::backward_filter(g, f32, a, b, out, space, ctx.stream(), version);
      }
    }
    switch (pass) {
      case ConvPass::forward:
        return cuda::conv2d_forward_nhwc(g, a, b, nullptr, out, space, ctx.stream(), math);
      case ConvPass::backward_data:
        return cuda::conv2d_backward_data_nhwc(g, a, b, out, space, ctx.stream(), math);
      case ConvPass::backward_filter:
        return cuda::conv2d_backward_filter_nhwc(g, a, b, out, nullptr, space, ctx.stream(), math);
    }
  };
  ctx.fill(d_out[0], pass == ConvPass::backward_filter ? 0.0f : NAN);
  launch(0);
  ctx.synchronize();
  const std::vector<float> out = d_out[0].to_vector();
  const std::vector<float> out_nchw = pass == ConvPass::forward ? transposed(g.N, PQ, g.K, out)
                                      : pass == ConvPass::backward_data
                                          ? transposed(g.N, HW, g.C, out)
                                          : transposed(g.K, RS, host.Cg, out);
  row.rel_error = check(out_nchw, ref);
  if (row.rel_error <= row.tolerance) row.ms = measure_ms(ctx, options, launch);
  return row;
}

}  // namespace

int bench_conv(Context& ctx, const Options& options, std::ostream& out) {
  const std::optional<cuda::GemmMath> parsed = cuda::gemm_math_from_name(options.math);
  if (!parsed) throw Error("--math: expected fp32, tf32 or bf16, got '" + options.math + "'");
  const cuda::GemmMath math = *parsed;
  const kernels::ConvAlgorithm* only = nullptr;
  // --layout nhwc --version depthwise_nhwc_v2: that version's rows of the depthwise shapes only.
  const bool depthwise_only =
      options.layout == "nhwc" && options.version.rfind("depthwise_nhwc", 0) == 0;
  if (!options.version.empty() && !depthwise_only) {
    for (const kernels::ConvAlgorithm* a : kernels::conv_ladder()) {
      if (options.version == a->name) only = a;
    }
    if (!only) {
      std::string names;
      for (const kernels::ConvAlgorithm* a : kernels::conv_ladder()) {
        names += std::string(names.empty() ? "" : ", ") + a->name;
      }
      throw Error("--version '" + options.version + "': no such convolution version (" + names +
                  ")");
    }
  }
  std::vector<ConvShape> shapes = parse_conv_shapes(options.shapes);
  if (shapes.empty()) shapes = default_conv_shapes();

  Table table(out, device_peak(ctx));
  Random random(1);
  std::vector<std::string> picks;  // the "auto:" lines printed after the table
  for (const ConvShape& shape : shapes) {
    const Conv2dGeometry& g = shape.g;
    const HostTensors host(g, random);
    const Shape x_shape{g.N, g.C, g.H, g.W}, w_shape{g.K, g.C / g.groups, g.R, g.S},
        y_shape{g.N, g.K, host.P, host.Q};
    const double flops = 2.0 * double(g.N * g.K * host.P * host.Q) * double(host.Cg * g.R * g.S);
    const double bytes =
        double(shape_numel(x_shape) + shape_numel(w_shape) + shape_numel(y_shape)) * sizeof(float);
    for (ConvPass pass : kPasses) {
      // What the pass reads and writes: (in0, in1) -> out.
      const std::vector<float>& in0 = pass == ConvPass::backward_data ? host.dy : host.x;
      const std::vector<float>& in1 = pass == ConvPass::forward         ? host.w
                                      : pass == ConvPass::backward_data ? host.w
                                                                        : host.dy;
      const Shape in0_shape = pass == ConvPass::backward_data ? y_shape : x_shape;
      const Shape in1_shape = pass == ConvPass::backward_filter ? y_shape : w_shape;
      const Shape out_shape = pass == ConvPass::forward         ? y_shape
                              : pass == ConvPass::backward_data ? x_shape
                                                                : w_shape;
      const Reference ref = reference(host, pass, shape_numel(out_shape), flops, random);
      if (options.layout == "nhwc" && g.depthwise()) {
        // Every version of the direct kernel that takes g, production's last (marked '*').
        const std::vector<dw::Version> versions =
            depthwise_versions(depthwise_pass(pass), g, dw::Element::f32);
        for (dw::Version v : versions) {
          const bool production = v == versions.back();
          if (depthwise_only && depthwise_row_name("depthwise_nhwc", v, false) != options.version) {
            continue;
          }
          table.print(nhwc_row(ctx, options, shape, host, pass, ref, math, v, production));
        }
        continue;
      }
      if (options.layout == "nhwc") {
        table.print(nhwc_row(ctx, options, shape, host, pass, ref, math));
        continue;
      }
      picks.push_back(std::string("auto: ") + peer_pass_name(pass) + " " +
                      kernels::get_conv_algorithm(pass, g, math).name + " " + shape.name);
      DevicePass dev(pass, g);
      const Tensor host_in0 = Tensor::from_vector(in0_shape, in0);
      const Tensor host_in1 = Tensor::from_vector(in1_shape, in1);
      const int copies = rotation_copies(size_t(bytes));
      for (int i = 0; i < copies; ++i) {
        dev.in0.push_back(ctx.empty(in0_shape));
        dev.in1.push_back(ctx.empty(in1_shape));
        dev.out.push_back(ctx.empty(out_shape));
        dev.in0.back().copy_from(host_in0);
        dev.in1.back().copy_from(host_in1);
      }
      for (const kernels::ConvAlgorithm* algorithm : kernels::conv_ladder()) {
        if (only && algorithm != only) continue;
        if (!only && !algorithm->computes_in(pass, math)) continue;
        if (!algorithm->supports(pass, g)) {
          if (only) {
            out << shape.name << " " << peer_pass_name(pass) << ": " << options.version
                << " does not implement this pass for this shape\n";
          }
          continue;
        }
        Row row;
        row.shape = shape.name;
        row.pass = peer_pass_name(pass);
        row.version = algorithm->name;
        row.check = ref.kind;
        const bool in_math = algorithm->computes_in(pass, math);
        row.tolerance = in_math ? kernels::conv_find_tolerance(math) : kTolerance;
        row.flops = flops;
        row.bytes = bytes;
        row.peak = in_math ? options.math : "fp32";
        const size_t ws = algorithm->workspace(pass, g, false);
        row.workspace_bytes = double(ws * sizeof(float));
        dev.workspace = ctx.empty({int64_t(std::max<size_t>(ws, 1))});
        ctx.fill(dev.out[0], pass == ConvPass::backward_filter ? 0.0f : NAN);
        dev.launch(0, *algorithm, math, ctx.stream());
        ctx.synchronize();
        row.rel_error = check(dev.out[0].to_vector(), ref);
        if (row.rel_error <= row.tolerance) {
          row.ms = measure_ms(ctx, options,
                              [&](int call) { dev.launch(call, *algorithm, math, ctx.stream()); });
        }
        dev.workspace = Tensor();
        table.print(row);
      }
    }
  }
  if (!picks.empty()) out << "\n";
  for (const std::string& line : picks) out << line << "\n";
  return table.status();
}

}  // namespace crema::bench
