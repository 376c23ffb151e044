// crema bench conv-tc: the convolutions on 16-bit NHWC tensors (kernels/convolution/
// convolution_tc.h: bf16 and fp16 operands, fp32 sums) on each shape and pass, checked, then
// timed over input copies rotated past L2. Default shapes: the peer benchmark's six, then every
// distinct convolution of ResNet-50 (torchvision v1.5: the stride on the 3x3) at batch 128.
// --math bf16 keeps the bf16 rows (default: bf16 and fp16). The version column names the kernels
// that ran: tc_bf16 (mma.sync) and, where the geometry fits them on an H100 or H200, a second row
// tc_bf16_wgmma (the wgmma + TMA ring kernel) and, for stride-1 filters with taps, a third
// tc_bf16_wgmma_halo (halo tiles), for stride-1 1x1s of short reductions a fourth
// tc_bf16_wgmma_stream (streaming tiles), and for backward data with few channels tc_bf16_col2im
// (one GEMM and a gather: convolution_col2im_nhwc.h) and tc_bf16_direct (the direct kernel:
// convolution_few_channels_nhwc.h), and for groups of 4, 8 or 16 channels tc_bf16_grouped (the
// direct grouped kernels: convolution_grouped_nhwc.h); '*' marks the family production picks
// (TcKernels::best), and the same for f16. --math tf32 runs the same shapes on f32 NHWC tensors
// in tf32 math instead (convolution.h: conv2d_*_nhwc with GemmMath::tf32): nhwc_tf32 (the
// mma.sync implicit GEMM, operands rounded to TF32) and, where it fits, nhwc_tf32_wgmma (the
// same wgmma + TMA kernels, operands truncated to TF32) for forward and backward data, and
// nhwc_tf32_col2im and nhwc_tf32_direct for backward data with few channels; the filter gradient
// has mma.sync only.
// Depthwise geometries (`--shape depthwise`: the zoo's depthwise layers at batch 64) run the
// direct kernels: a row for every version that takes the geometry (depthwise_nhwc_bf16_v1, _v2,
// ...; or _f16_, _tf32_; production's, marked '*', last), %peak of DRAM's bandwidth; --version
// depthwise_nhwc_bf16_v2 keeps that version's rows only, as --version tc_bf16_wgmma (or any
// other family's name, without the '*') keeps that family's.
//
// The check: kSamples outputs computed in double on the host from the definition, on the same
// rounded inputs (forward y, data dx: rounded once to the type; filter dw: fp32, from zeros), the
// whole output scanned for NaN (forward and data outputs are poisoned first). Tolerance (relative,
// ||out - ref|| / ||ref||): 4 x 2^-m, m = 8 (bf16) or 11 (fp16), the output rounding's bound with
// room for the fp32 sums; tf32 (f32 inputs as drawn, the tensor cores reading 10 mantissa bits of
// each operand): 2e-3, the GEMM benchmark's and conv_find_tolerance's (truncation's bias, about
// 2^-11 ln 2 per operand, gives ~7e-4).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <vector>

#include "apps/bench.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
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

// What a row's tensors hold: a 16-bit type (the tensor-core passes of convolution_tc.h) or f32 in
// tf32 math (conv2d_*_nhwc).
struct Tensors {
  bool f32;
  cuda::TcType type;  // the 16-bit type when !f32
  int bytes() const { return f32 ? 4 : 2; }
  const char* name() const { return f32 ? "tf32" : cuda::tc_type_name(type); }
};

// The type's bits of v, rounded to nearest even, and what they are (core/float16.h).
uint16_t to_bits(float v, cuda::TcType type) {
  return type == cuda::TcType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
}
double widen(uint16_t b, cuda::TcType type) {
  return type == cuda::TcType::bf16 ? bf16_to_f32(b) : f16_to_f32(b);
}

// x [N,H,W,C], w [K,R,S,Cg], dy [N,P,Q,K] as stored (the type's bits, or floats) and as the
// values they hold, and one output element of a pass in double from the definition
// (convolution.h, "NHWC").
struct Host {
  const Conv2dGeometry& g;
  Tensors tensors;
  int64_t Cg, Kg, P, Q;
  std::vector<uint8_t> x, w, dy;         // as uploaded
  std::vector<float> x_at, w_at, dy_at;  // their values

  Host(const Conv2dGeometry& geometry, Tensors t, Random& random)
      : g(geometry), tensors(t), Cg(g.C / g.groups), Kg(g.K / g.groups), P(g.P()), Q(g.Q()) {
    auto fill = [&](std::vector<uint8_t>& bytes, std::vector<float>& values, int64_t n) {
      bytes.resize(size_t(n) * size_t(t.bytes()));
      values.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) {
        float v = float(random.uniform(-1.0, 1.0));
        if (!t.f32) {
          const uint16_t b = to_bits(v, t.type);
          v = float(widen(b, t.type));
          std::memcpy(&bytes[size_t(i) * 2], &b, 2);
        } else {
          std::memcpy(&bytes[size_t(i) * 4], &v, 4);
        }
        values[size_t(i)] = v;
      }
    };
    fill(x, x_at, g.N * g.H * g.W * g.C);
    fill(w, w_at, g.K * g.R * g.S * Cg);
    fill(dy, dy_at, g.N * P * Q * g.K);
  }
  double xv(int64_t n, int64_t i, int64_t j, int64_t c) const {
    if (i < 0 || i >= g.H || j < 0 || j >= g.W) return 0;
    return x_at[size_t(((n * g.H + i) * g.W + j) * g.C + c)];
  }
  double wv(int64_t k, int64_t r, int64_t s, int64_t c) const {
    return w_at[size_t(((k * g.R + r) * g.S + s) * Cg + c)];
  }
  double dyv(int64_t n, int64_t p, int64_t q, int64_t k) const {
    return dy_at[size_t(((n * P + p) * Q + q) * g.K + k)];
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

bool uses_col2im(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels,
                 const Tensors& t) {
  if (pass != ConvPass::backward_data) return false;
  return t.f32 ? cuda::conv2d_backward_data_nhwc_uses_col2im(g, cuda::GemmMath::tf32, kernels)
               : cuda::conv2d_tc_backward_data_uses_col2im(g, t.type, kernels);
}

bool uses_direct(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels,
                 const Tensors& t) {
  if (pass != ConvPass::backward_data) return false;
  return t.f32 ? cuda::conv2d_backward_data_nhwc_uses_direct(g, cuda::GemmMath::tf32, kernels)
               : cuda::conv2d_tc_backward_data_uses_direct(g, t.type, kernels);
}

bool uses_direct_mma(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels,
                     const Tensors& t) {
  if (pass != ConvPass::backward_data) return false;
  return t.f32 ? cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, cuda::GemmMath::tf32, kernels)
               : cuda::conv2d_tc_backward_data_uses_direct_mma(g, t.type, kernels);
}

bool uses_stem(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels, const Tensors& t) {
  if (t.f32 || pass == ConvPass::backward_data) return false;
  return pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_stem(g, kernels)
                                   : cuda::conv2d_tc_backward_filter_uses_stem(g, kernels);
}

bool uses_grouped(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels,
                  const Tensors& t) {
  if (t.f32) return false;
  return pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_grouped(g, kernels)
         : pass == ConvPass::backward_data
             ? cuda::conv2d_tc_backward_data_uses_grouped(g, kernels)
             : cuda::conv2d_tc_backward_filter_uses_grouped(g, kernels);
}

bool uses_halo(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels, bool f32) {
  return pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_halo(g, kernels, f32)
         : pass == ConvPass::backward_data
             ? cuda::conv2d_tc_backward_data_uses_halo(g, kernels, f32)
             : false;
}

bool uses_stream(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels, bool f32) {
  return pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_stream(g, kernels, f32)
         : pass == ConvPass::backward_data
             ? cuda::conv2d_tc_backward_data_uses_stream(g, kernels, f32)
             : false;
}

bool uses_wgmma(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels kernels, bool f32) {
  if (f32) {
    const cuda::GemmMath tf32 = cuda::GemmMath::tf32;
    return pass == ConvPass::forward ? cuda::conv2d_forward_nhwc_uses_wgmma(g, tf32, kernels)
           : pass == ConvPass::backward_data
               ? cuda::conv2d_backward_data_nhwc_uses_wgmma(g, tf32, kernels)
               : cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, tf32, kernels);
  }
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

// The workspace bytes of a pass, as a layer takes them (kernels::conv2d_workspace_bytes: the
// forward fuses no statistics here either, so it takes none).
size_t workspace_bytes(const Conv2dGeometry& g, ConvPass pass, const Tensors& t) {
  const DType dtype = t.f32 ? DType::f32 : t.type == cuda::TcType::bf16 ? DType::bf16 : DType::f16;
  kernels::ConvRequest request;
  request.math = cuda::GemmMath::tf32;  // read for f32 only
  return kernels::conv2d_workspace_bytes(Device::cuda(0), pass, g, dtype, Layout::nhwc, request,
                                         false, 1);
}

namespace dw = cuda::depthwise_nhwc;

dw::Pass depthwise_pass(ConvPass pass) {
  return pass == ConvPass::forward         ? dw::Pass::forward
         : pass == ConvPass::backward_data ? dw::Pass::data
                                           : dw::Pass::filter;
}

dw::Element depthwise_element(const Tensors& t) {
  return t.f32 ? dw::Element::f32 : dw::element_of(t.type);
}

// The family that runs `pass` on g with `kernels`, as the version column's suffix: col2im, halo
// tiles, wgmma or mma.sync (the Tensors are 16-byte aligned).
const char* family_suffix(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels k,
                          const Tensors& t) {
  return uses_grouped(g, pass, k, t)      ? "_grouped"
         : uses_stem(g, pass, k, t)       ? "_stem"
         : uses_direct_mma(g, pass, k, t) ? "_direct_mma"
         : uses_direct(g, pass, k, t)     ? "_direct"
         : uses_col2im(g, pass, k, t)     ? "_col2im"
         : uses_halo(g, pass, k, t.f32)   ? "_wgmma_halo"
         : uses_stream(g, pass, k, t.f32) ? "_wgmma_stream"
         : uses_wgmma(g, pass, k, t.f32)  ? "_wgmma"
                                          : "";
}
std::string family_name(const Conv2dGeometry& g, ConvPass pass, cuda::TcKernels k,
                        const Tensors& t) {
  return std::string(t.f32 ? "nhwc_" : "tc_") + t.name() + family_suffix(g, pass, k, t);
}

// One pass on one shape and type with `kernels` (depthwise geometries: the direct kernel's
// `version`, `production` marking choose()'s): checked, then timed.
Row tc_row(Context& ctx, const Options& options, const ConvShape& shape, const Host& host,
           ConvPass pass, cuda::TcKernels kernels, Random& random,
           dw::Version version = dw::Version::best, bool production = true) {
  const Conv2dGeometry& g = shape.g;
  const Tensors t = host.tensors;
  const std::vector<uint8_t>& in0 = pass == ConvPass::backward_data ? host.dy : host.x;
  const std::vector<uint8_t>& in1 = pass == ConvPass::backward_filter ? host.dy : host.w;
  const int64_t out_size = host.out_size(pass);
  const int out_element = pass == ConvPass::backward_filter ? 4 : t.bytes();
  const size_t out_bytes = size_t(out_size) * size_t(out_element);
  const size_t ws = workspace_bytes(g, pass, t);
  Row row;
  row.shape = shape.name;
  row.pass = pass_name(pass);
  const std::string ran = family_name(g, pass, kernels, t);
  row.version = ran + (ran == family_name(g, pass, cuda::TcKernels::best, t) ? "*" : "");
  if (g.depthwise()) {
    row.version =
        depthwise_row_name(std::string("depthwise_nhwc_") + t.name(), version, production);
  }
  row.check = "sampled" + std::to_string(kSamples);
  row.tolerance = t.f32 ? 2e-3 : 4 * std::ldexp(1.0, t.type == cuda::TcType::bf16 ? -8 : -11);
  row.flops = 2.0 * double(g.N * g.K * host.P * host.Q) * double(host.Cg * g.R * g.S);
  row.bytes = double(host.x.size() + host.w.size() + host.dy.size());
  row.peak = t.f32 ? "tf32" : "bf16";    // the fp16 tensor-core peak is bf16's
  if (g.depthwise()) row.peak = "dram";  // the direct kernel: memory-bound
  row.workspace_bytes = double(ws);
  // Device buffers, one set per rotation copy: in0, in1, out.
  std::vector<Tensor> buffers;
  auto bytes_tensor = [&](size_t bytes) {
    return ctx.empty({int64_t((bytes + 3) / 4)});  // float storage, 16-byte aligned
  };
  const int copies = rotation_copies(size_t(row.bytes));
  for (int i = 0; i < copies; ++i) {
    buffers.push_back(bytes_tensor(in0.size()));
    buffers.push_back(bytes_tensor(in1.size()));
    buffers.push_back(bytes_tensor(out_bytes));
    gpu::copy(buffers[size_t(3 * i)].data<float>(), in0.data(), in0.size(), nullptr);
    gpu::copy(buffers[size_t(3 * i + 1)].data<float>(), in1.data(), in1.size(), nullptr);
  }
  Tensor workspace = bytes_tensor(std::max<size_t>(ws, 4));
  auto launch = [&](int call) {
    const size_t i = size_t(call % copies);
    const void *a = buffers[3 * i].data<float>(), *b = buffers[3 * i + 1].data<float>();
    void* out = buffers[3 * i + 2].data<float>();
    void* space = workspace.data<float>();
    if (g.depthwise()) {
      const dw::Element type = depthwise_element(t);
      switch (pass) {
        case ConvPass::forward:
          return dw::forward(g, type, a, b, out, {}, space, ctx.stream(), version);
        case ConvPass::backward_data:
          return dw::backward_data(g, type, a, b, out, ctx.stream(), version);
        case ConvPass::backward_filter:
          return dw::backward_filter(g, type, a, b, static_cast<float*>(out), space, ctx.stream(),
                                     version);
      }
    }
    if (t.f32) {
      const auto *fa = static_cast<const float*>(a), *fb = static_cast<const float*>(b);
      auto* fout = static_cast<float*>(out);
      auto* fspace = static_cast<float*>(space);
      const cuda::GemmMath tf32 = cuda::GemmMath::tf32;
      switch (pass) {
        case ConvPass::forward:
          return cuda::conv2d_forward_nhwc(g, fa, fb, nullptr, fout, fspace, ctx.stream(), tf32,
                                           kernels);
        case ConvPass::backward_data:
          return cuda::conv2d_backward_data_nhwc(g, fa, fb, fout, fspace, ctx.stream(), tf32,
                                                 kernels);
        case ConvPass::backward_filter:
          return cuda::conv2d_backward_filter_nhwc(g, fa, fb, fout, nullptr, fspace, ctx.stream(),
                                                   tf32, kernels);
      }
    }
    const cuda::TcType type = t.type;
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
  // Poison (0x7fc0: NaN in bf16 and in fp16; an fp32 NaN), or zeros for the accumulated filter
  // gradient.
  if (pass == ConvPass::backward_filter) {
    const std::vector<float> zeros(size_t(out_size), 0.0f);
    gpu::copy(buffers[2].data<float>(), zeros.data(), out_bytes, nullptr);
  } else if (t.f32) {
    const std::vector<float> poison(size_t(out_size), NAN);
    gpu::copy(buffers[2].data<float>(), poison.data(), out_bytes, nullptr);
  } else {
    const std::vector<uint16_t> poison(size_t(out_size), 0x7fc0);
    gpu::copy(buffers[2].data<float>(), poison.data(), out_bytes, nullptr);
  }
  launch(0);
  ctx.synchronize();
  std::vector<float> out(static_cast<size_t>(out_size));
  if (out_element == 4) {
    gpu::copy(out.data(), buffers[2].data<float>(), out_bytes, nullptr);
  } else {
    std::vector<uint16_t> bits(static_cast<size_t>(out_size));
    gpu::copy(bits.data(), buffers[2].data<float>(), out_bytes, nullptr);
    for (size_t i = 0; i < bits.size(); ++i) out[i] = float(widen(bits[i], t.type));
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
  std::vector<ConvShape> shapes = parse_conv_shapes(options.shapes);
  if (shapes.empty()) {
    shapes = default_conv_shapes();
    for (const ConvShape& s : resnet50_shapes()) shapes.push_back(s);
  }
  std::vector<Tensors> kinds;
  if (options.math == "tf32") {
    kinds.push_back({true, cuda::TcType::bf16});
  } else {
    kinds.push_back({false, cuda::TcType::bf16});
    if (options.math != "bf16") kinds.push_back({false, cuda::TcType::f16});
  }
  Table table(out, device_peak(ctx));
  Random random(1);
  for (const ConvShape& shape : shapes) {
    for (const Tensors& kind : kinds) {
      const Host host(shape.g, kind, random);
      for (ConvPass pass : kPasses) {
        if (shape.g.depthwise()) {
          // Every version of the direct kernel that takes g, production's last (marked '*');
          // --version depthwise_nhwc_bf16_v2 keeps that one.
          const std::vector<dw::Version> versions =
              depthwise_versions(depthwise_pass(pass), shape.g, depthwise_element(kind));
          for (dw::Version v : versions) {
            const std::string name =
                depthwise_row_name(std::string("depthwise_nhwc_") + kind.name(), v, false);
            if (!options.version.empty() && options.version != name) continue;
            table.print(tc_row(ctx, options, shape, host, pass, cuda::TcKernels::best, random, v,
                               v == versions.back()));
          }
          continue;
        }
        // Every kernel family that runs the geometry ('*' marks the one `best` picks), or the
        // one --version names (tc_bf16_wgmma: that family's rows only).
        auto row = [&](cuda::TcKernels k) {
          if (!options.version.empty() && options.version != family_name(shape.g, pass, k, kind)) {
            return;
          }
          table.print(tc_row(ctx, options, shape, host, pass, k, random));
        };
        row(cuda::TcKernels::mma_sync);
        if (uses_wgmma(shape.g, pass, cuda::TcKernels::wgmma, kind.f32)) {
          row(cuda::TcKernels::wgmma);
        }
        if (uses_halo(shape.g, pass, cuda::TcKernels::wgmma_halo, kind.f32)) {
          row(cuda::TcKernels::wgmma_halo);
        }
        if (uses_stream(shape.g, pass, cuda::TcKernels::wgmma_stream, kind.f32)) {
          row(cuda::TcKernels::wgmma_stream);
        }
        if (uses_col2im(shape.g, pass, cuda::TcKernels::col2im, kind)) {
          row(cuda::TcKernels::col2im);
        }
        if (uses_direct(shape.g, pass, cuda::TcKernels::direct, kind)) {
          row(cuda::TcKernels::direct);
        }
        if (uses_direct_mma(shape.g, pass, cuda::TcKernels::direct_mma, kind)) {
          row(cuda::TcKernels::direct_mma);
        }
        if (uses_stem(shape.g, pass, cuda::TcKernels::stem_mma, kind)) {
          row(cuda::TcKernels::stem_mma);
        }
        if (uses_grouped(shape.g, pass, cuda::TcKernels::grouped, kind)) {
          row(cuda::TcKernels::grouped);
        }
      }
    }
  }
  return table.status();
}

}  // namespace crema::bench
