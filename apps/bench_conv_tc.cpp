// crema bench conv-tc: the convolutions on 16-bit NHWC tensors (kernels/convolution/
// convolution_tc.h: bf16 and fp16 operands, fp32 sums) on each shape and pass, checked, then
// timed over input copies rotated past L2. Default shapes: the peer benchmark's six, then every
// distinct convolution of ResNet-50 (torchvision v1.5: the stride on the 3x3) at batch 128.
// --math bf16 keeps the bf16 rows (default: bf16 and fp16). The version column names the kernels
// that ran: tc_bf16 (mma.sync) and, where the geometry fits them on an H100 or H200, a second row
// tc_bf16_wgmma (the wgmma + TMA kernels); '*' marks the family production picks
// (TcKernels::best), and the same for f16.
//
// The check: kSamples outputs computed in double on the host from the definition, on the same
// rounded inputs (forward y, data dx: rounded once to the type; filter dw: fp32, from zeros), the
// whole output scanned for NaN (forward and data outputs are poisoned first). Tolerance (relative,
// ||out - ref|| / ||ref||): 4 x 2^-m, m = 8 (bf16) or 11 (fp16), the output rounding's bound with
// room for the fp32 sums.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>

#include "apps/bench.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/convolution/convolution_tc.h"

namespace crema::bench {
namespace {

namespace cuda = kernels::cuda;
using kernels::Conv2dGeometry;
using kernels::ConvPass;

constexpr int kSamples = 256;
constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                ConvPass::backward_filter};

const char* pass_name(ConvPass pass) {
  return pass == ConvPass::forward ? "fwd" : pass == ConvPass::backward_data ? "dgrad" : "wgrad";
}

// ResNet-50's convolutions at batch 128, each distinct geometry once.
std::vector<ConvShape> resnet50_shapes() {
  struct Layer {
    const char* name;
    int64_t C, H, K, R, stride, pad;
  };
  const Layer layers[] = {
      {"r50 stem 7x7s2 3->64 224", 3, 224, 64, 7, 2, 3},
      {"r50 1x1 64->64 56", 64, 56, 64, 1, 1, 0},
      {"r50 3x3 64->64 56", 64, 56, 64, 3, 1, 1},
      {"r50 1x1 64->256 56", 64, 56, 256, 1, 1, 0},
      {"r50 1x1 256->64 56", 256, 56, 64, 1, 1, 0},
      {"r50 1x1 256->128 56", 256, 56, 128, 1, 1, 0},
      {"r50 3x3s2 128->128 56", 128, 56, 128, 3, 2, 1},
      {"r50 1x1s2 256->512 56", 256, 56, 512, 1, 2, 0},
      {"r50 3x3 128->128 28", 128, 28, 128, 3, 1, 1},
      {"r50 1x1 128->512 28", 128, 28, 512, 1, 1, 0},
      {"r50 1x1 512->128 28", 512, 28, 128, 1, 1, 0},
      {"r50 1x1 512->256 28", 512, 28, 256, 1, 1, 0},
      {"r50 3x3s2 256->256 28", 256, 28, 256, 3, 2, 1},
      {"r50 1x1s2 512->1024 28", 512, 28, 1024, 1, 2, 0},
      {"r50 3x3 256->256 14", 256, 14, 256, 3, 1, 1},
      {"r50 1x1 256->1024 14", 256, 14, 1024, 1, 1, 0},
      {"r50 1x1 1024->256 14", 1024, 14, 256, 1, 1, 0},
      {"r50 1x1 1024->512 14", 1024, 14, 512, 1, 1, 0},
      {"r50 3x3s2 512->512 14", 512, 14, 512, 3, 2, 1},
      {"r50 1x1s2 1024->2048 14", 1024, 14, 2048, 1, 2, 0},
      {"r50 3x3 512->512 7", 512, 7, 512, 3, 1, 1},
      {"r50 1x1 512->2048 7", 512, 7, 2048, 1, 1, 0},
      {"r50 1x1 2048->512 7", 2048, 7, 512, 1, 1, 0},
  };
  std::vector<ConvShape> shapes;
  for (const Layer& l : layers) {
    Conv2dGeometry g{128, l.C, l.H, l.H, l.K, l.R, l.R, l.pad, l.pad, l.stride, l.stride};
    shapes.push_back({l.name, g});
  }
  return shapes;
}

uint16_t to_bits(float v, cuda::TcType type) {
  if (type == cuda::TcType::bf16) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  // |v| <= 1, normal or zero in fp16 at 2^-14 and above; below, the subnormal quantum 2^-24.
  const double a = std::fabs(double(v));
  const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
  const int64_t m = int64_t(std::nearbyint(std::ldexp(a, 10 - e)));
  const int64_t bits = a < std::ldexp(1.0, -14) ? m : (int64_t(e + 15) << 10) + (m - 1024);
  return uint16_t((v < 0 ? 0x8000 : 0) | bits);
}

double widen(uint16_t b, cuda::TcType type) {
  if (type == cuda::TcType::bf16) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int exponent = (b >> 10) & 31, mantissa = b & 1023;
  const double v = exponent == 0    ? std::ldexp(mantissa, -24)
                   : exponent == 31 ? NAN
                                    : std::ldexp(1024 + mantissa, exponent - 25);
  return b & 0x8000u ? -v : v;
}

// x [N,H,W,C], w [K,R,S,Cg], dy [N,P,Q,K] as the type's bits, and one output element of a pass
// in double from the definition (convolution.h, "NHWC").
struct Host {
  const Conv2dGeometry& g;
  cuda::TcType type;
  int64_t Cg, Kg, P, Q;
  std::vector<uint16_t> x, w, dy;

  Host(const Conv2dGeometry& geometry, cuda::TcType t, Random& random)
      : g(geometry), type(t), Cg(g.C / g.groups), Kg(g.K / g.groups), P(g.P()), Q(g.Q()) {
    auto fill = [&](std::vector<uint16_t>& v, int64_t n) {
      for (int64_t i = 0; i < n; ++i) v.push_back(to_bits(float(random.uniform(-1.0, 1.0)), t));
    };
    fill(x, g.N * g.H * g.W * g.C);
    fill(w, g.K * g.R * g.S * Cg);
    fill(dy, g.N * P * Q * g.K);
  }
  double xv(int64_t n, int64_t i, int64_t j, int64_t c) const {
    if (i < 0 || i >= g.H || j < 0 || j >= g.W) return 0;
    return widen(x[size_t(((n * g.H + i) * g.W + j) * g.C + c)], type);
  }
  double wv(int64_t k, int64_t r, int64_t s, int64_t c) const {
    return widen(w[size_t(((k * g.R + r) * g.S + s) * Cg + c)], type);
  }
  double dyv(int64_t n, int64_t p, int64_t q, int64_t k) const {
    return widen(dy[size_t(((n * P + p) * Q + q) * g.K + k)], type);
  }
  int64_t out_size(ConvPass pass) const {
    return pass == ConvPass::forward         ? g.N * P * Q * g.K
           : pass == ConvPass::backward_data ? g.N * g.H * g.W * g.C
                                             : g.K * g.R * g.S * Cg;
  }
  double exact(ConvPass pass, int64_t index) const {
    double sum = 0;
    if (pass == ConvPass::forward) {  // y[n,p,q,k]
      const int64_t k = index % g.K, q = index / g.K % Q, p = index / (g.K * Q) % P,
                    n = index / (g.K * Q * P), c0 = k / Kg * Cg;
      for (int64_t r = 0; r < g.R; ++r)
        for (int64_t s = 0; s < g.S; ++s)
          for (int64_t c = 0; c < Cg; ++c)
            sum += wv(k, r, s, c) * xv(n, p * g.stride_h - g.pad_h + r * g.dilation_h,
                                       q * g.stride_w - g.pad_w + s * g.dilation_w, c0 + c);
    } else if (pass == ConvPass::backward_data) {  // dx[n,h,w,c]
      const int64_t c = index % g.C, j = index / g.C % g.W, i = index / (g.C * g.W) % g.H,
                    n = index / (g.C * g.W * g.H), group = c / Cg;
      for (int64_t k = group * Kg; k < (group + 1) * Kg; ++k)
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s) {
            const int64_t ph = i + g.pad_h - r * g.dilation_h, qw = j + g.pad_w - s * g.dilation_w;
            if (ph < 0 || qw < 0 || ph % g.stride_h || qw % g.stride_w) continue;
            const int64_t p = ph / g.stride_h, q = qw / g.stride_w;
            if (p < P && q < Q) sum += dyv(n, p, q, k) * wv(k, r, s, c - group * Cg);
          }
    } else {  // dw[k,r,s,c]
      const int64_t c = index % Cg, s = index / Cg % g.S, r = index / (Cg * g.S) % g.R,
                    k = index / (Cg * g.S * g.R), c_in = k / Kg * Cg + c;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q)
            sum += dyv(n, p, q, k) * xv(n, p * g.stride_h - g.pad_h + r * g.dilation_h,
                                        q * g.stride_w - g.pad_w + s * g.dilation_w, c_in);
    }
    return sum;
  }
};

bool uses_wgmma(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels) {
  switch (pass) {
    case ConvPass::forward:
      return cuda::conv2d_tc_forward_uses_wgmma(g, kernels);
    case ConvPass::backward_data:
      return cuda::conv2d_tc_backward_data_uses_wgmma(g, kernels);
    case ConvPass::backward_filter:
      return cuda::conv2d_tc_backward_filter_uses_wgmma(g, kernels);
  }
  return false;
}

// One pass on one shape and type with `kernels`: checked, then timed.
Row tc_row(Context& ctx, const Options& options, const ConvShape& shape, const Host& host,
           ConvPass pass, cuda::TcKernels kernels, Random& random) {
  const Conv2dGeometry& g = shape.g;
  const cuda::TcType type = host.type;
  const std::vector<uint16_t>& in0 = pass == ConvPass::backward_data ? host.dy : host.x;
  const std::vector<uint16_t>& in1 = pass == ConvPass::backward_filter ? host.dy : host.w;
  const int64_t out_size = host.out_size(pass);
  const size_t out_bytes = size_t(out_size) * (pass == ConvPass::backward_filter ? 4 : 2);
  const size_t ws = pass == ConvPass::forward ? cuda::conv2d_tc_forward_workspace(g)
                    : pass == ConvPass::backward_data
                        ? cuda::conv2d_tc_backward_data_workspace(g, type)
                        : cuda::conv2d_tc_backward_filter_workspace(g);
  Row row;
  row.shape = shape.name;
  row.pass = pass_name(pass);
  const bool wgmma = uses_wgmma(g, pass, kernels);
  const bool best = wgmma == uses_wgmma(g, pass, cuda::TcKernels::best);
  row.version =
      std::string("tc_") + cuda::tc_type_name(type) + (wgmma ? "_wgmma" : "") + (best ? "*" : "");
  row.check = "sampled" + std::to_string(kSamples);
  row.tolerance = 4 * std::ldexp(1.0, type == cuda::TcType::bf16 ? -8 : -11);
  row.flops = 2.0 * double(g.N * g.K * host.P * host.Q) * double(host.Cg * g.R * g.S);
  row.bytes = double(host.x.size() + host.w.size() + host.dy.size()) * 2;
  row.peak = "bf16";  // the fp16 tensor-core peak is the same
  row.workspace_bytes = double(ws);
  // Device buffers, one set per rotation copy: in0, in1, out.
  std::vector<Tensor> buffers;
  auto bytes_tensor = [&](size_t bytes) {
    return ctx.empty({int64_t((bytes + 3) / 4)});  // float storage, 16-byte aligned
  };
  const int copies = rotation_copies(size_t(row.bytes));
  for (int i = 0; i < copies; ++i) {
    buffers.push_back(bytes_tensor(in0.size() * 2));
    buffers.push_back(bytes_tensor(in1.size() * 2));
    buffers.push_back(bytes_tensor(out_bytes));
    gpu::copy(buffers[size_t(3 * i)].data<float>(), in0.data(), in0.size() * 2, nullptr);
    gpu::copy(buffers[size_t(3 * i + 1)].data<float>(), in1.data(), in1.size() * 2, nullptr);
  }
  Tensor workspace = bytes_tensor(std::max<size_t>(ws, 4));
  auto launch = [&](int call) {
    const size_t i = size_t(call % copies);
    const void *a = buffers[3 * i].data<float>(), *b = buffers[3 * i + 1].data<float>();
    void* out = buffers[3 * i + 2].data<float>();
    void* space = workspace.data<float>();
    switch (pass) {
      case ConvPass::forward:
        return cuda::conv2d_tc_forward(g, type, a, b, out, {}, space, ctx.stream(), kernels);
      case ConvPass::backward_data:
        return cuda::conv2d_tc_backward_data(g, type, a, b, out, space, ctx.stream(), kernels);
      case ConvPass::backward_filter:
        return cuda::conv2d_tc_backward_filter(g, type, a, b, static_cast<float*>(out), space,
                                               ctx.stream(), kernels);
    }
  };
  // Poison (0x7fc0: NaN in bf16 and in fp16), or zeros for the accumulated filter gradient.
  const std::vector<uint16_t> poison(out_bytes / 2, pass == ConvPass::backward_filter ? 0 : 0x7fc0);
  gpu::copy(buffers[2].data<float>(), poison.data(), out_bytes, nullptr);
  launch(0);
  ctx.synchronize();
  std::vector<float> out(static_cast<size_t>(out_size));
  if (pass == ConvPass::backward_filter) {
    gpu::copy(out.data(), buffers[2].data<float>(), out_bytes, nullptr);
  } else {
    std::vector<uint16_t> bits(static_cast<size_t>(out_size));
    gpu::copy(bits.data(), buffers[2].data<float>(), out_bytes, nullptr);
    for (size_t i = 0; i < bits.size(); ++i) out[i] = float(widen(bits[i], type));
  }
  std::vector<float> picked;
  std::vector<double> want;
  for (int i = 0; i < kSamples; ++i) {
    const int64_t at = int64_t(random.below(uint64_t(out_size)));
    picked.push_back(out[size_t(at)]);
    want.push_back(host.exact(pass, at));
  }
  const bool nan = std::any_of(out.begin(), out.end(), [](float v) { return std::isnan(v); });
  row.rel_error = nan ? NAN : relative_error(picked.data(), want.data(), picked.size());
  if (row.rel_error <= row.tolerance) row.ms = measure_ms(ctx, options, launch);
  return row;
}

}  // namespace

int bench_conv_tc(Context& ctx, const Options& options, std::ostream& out) {
  if (options.math == "tf32") throw Error("--math: conv-tc runs bf16 and fp16 tensors, not tf32");
  std::vector<ConvShape> shapes;
  for (const std::string& text : options.shapes) shapes.push_back(parse_conv_shape(text));
  if (shapes.empty()) {
    shapes = default_conv_shapes();
    for (const ConvShape& s : resnet50_shapes()) shapes.push_back(s);
  }
  std::vector<cuda::TcType> types = {cuda::TcType::bf16};
  if (options.math != "bf16") types.push_back(cuda::TcType::f16);
  Table table(out, device_peak(ctx));
  Random random(1);
  for (const ConvShape& shape : shapes) {
    for (cuda::TcType type : types) {
      const Host host(shape.g, type, random);
      for (ConvPass pass : kPasses) {
        // Both kernel families where wgmma runs the geometry; '*' marks the one `best` picks.
        table.print(tc_row(ctx, options, shape, host, pass, cuda::TcKernels::mma_sync, random));
        if (uses_wgmma(shape.g, pass, cuda::TcKernels::wgmma)) {
          table.print(tc_row(ctx, options, shape, host, pass, cuda::TcKernels::wgmma, random));
        }
      }
    }
  }
  return table.status();
}

}  // namespace crema::bench
