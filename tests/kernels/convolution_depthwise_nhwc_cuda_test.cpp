// Depthwise convolution on channels-last tensors (convolution_depthwise_nhwc.h), reached the way
// the layers reach it: fp32 through cuda::conv2d_*_nhwc (every GemmMath: the same bits), bf16 and
// fp16 through cuda::conv2d_tc_*. The three passes against the double reference (ref::*_nhwc) on
// the same rounded inputs, on awkward geometries: N = 1, odd H and W, C = 3, 13 (one channel a
// thread), 8, 16, 24, 32, 40, 96 (16-byte vectors: fp32 at C % 4 == 0, 16-bit at C % 8 == 0),
// 3x3, 5x5, 7x7 and 3x5 / 5x3 filters, strides 1 and 2 (and (2, 1), (1, 2): the row walk and the
// tap loop), pad 0 to 3 (pad 3 on a 3x3: backward data's rotated filter gets padding -1),
// dilation 2, M = 2 and 3 filters a channel, a filter gradient cut into several slices. Outputs
// poisoned with NaN, the workspace with NaN, dw and db accumulated onto random values; each pass
// twice (bit-identical repeats); the epilogue (bias + residual + ReLU, in place too, and the
// per-channel sums of y and y^2) on every geometry in 16 bits; every tensor at a 1-element offset
// (not 16-byte aligned: the one-channel path); the Tensor-level dispatch names the kernel.
//
// Tolerance, per element (u = 2^-24; r = 2^-8 bf16, 2^-11 fp16 (round to nearest: relative error
// <= 2^-m with m = 8, 11), 0 for fp32 outputs, which are not rounded after the sums):
//   |got - want| <= r |want| + (1 + r) (n + 1) u sum|terms|
// n: the terms summed into the output (forward R*S, + bias + residual; data R*S*M; the filter
// gradient N*P*Q products + dw's start). Every addition of the fp32 sums joins disjoint terms, so
// at most n - 1 roundings lie on any term's path, plus one for the product (exact for 16-bit
// operands, one fma rounding for fp32 ones): (n + 1) u bounds them as in the tc tests (which use n,
// their products being exact). fp16 outputs below 2^-14 are subnormal, spaced 2^-24 apart: the
// store's rounding there is up to 2^-25 absolute, not 2^-11 relative, so fp16 adds 2^-25.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/convolution_tc.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::GemmMath;

// The three element types: bytes an element, rounding to them and widening back.
enum class Elem { f32, bf16, f16 };
const char* elem_name(Elem e) {
  return e == Elem::f32 ? "f32" : e == Elem::bf16 ? "bf16" : "f16";
}
size_t elem_bytes(Elem e) {
  return e == Elem::f32 ? 4 : 2;
}
int mantissa_bits(Elem e) {
  return e == Elem::f32 ? 0 : e == Elem::bf16 ? 8 : 11;
}

// A tensor's values as the type holds them, its bytes, and their magnitudes.
struct Values {
  Elem type;
  std::vector<uint8_t> bytes;
  std::vector<double> value, magnitude;
};
Values encode(const std::vector<float>& v, Elem type) {
  Values out{type, std::vector<uint8_t>(v.size() * elem_bytes(type)), {}, {}};
  for (size_t i = 0; i < v.size(); ++i) {
    double held = v[i];
    if (type == Elem::f32) {
      std::memcpy(out.bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t bits = type == Elem::bf16 ? f32_to_bf16_bits(v[i]) : f32_to_f16_bits(v[i]);
      std::memcpy(out.bytes.data() + 2 * i, &bits, 2);
      held = type == Elem::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
    out.value.push_back(held), out.magnitude.push_back(std::fabs(held));
  }
  return out;
}
std::vector<double> decode(const std::vector<uint8_t>& bytes, Elem type) {
  std::vector<double> v(bytes.size() / elem_bytes(type));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == Elem::f32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      v[i] = f;
    } else {
      uint16_t b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      v[i] = type == Elem::bf16 ? bf16_to_f32(b) : f16_to_f32(b);
    }
  }
  return v;
}
std::vector<float> uniform(Random& rng, int64_t count) {
  std::vector<float> v(size_t(count), 0.0f);
  for (float& x : v) x = float(rng.uniform(-1.0, 1.0));
  return v;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : ptr_(gpu::device_allocate(bytes + 16)) {}
  ~DeviceBuffer() { gpu::device_free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // `offset` bytes in (16-byte aligned at 0).
  void* at(size_t offset = 0) const { return static_cast<char*>(ptr_) + offset; }
  void upload(const void* host, size_t bytes, size_t offset = 0) {
    gpu::copy(at(offset), host, bytes, nullptr);
  }
  std::vector<uint8_t> download(size_t bytes, size_t offset = 0) const {
    std::vector<uint8_t> host(bytes);
    gpu::copy(host.data(), at(offset), bytes, nullptr);
    return host;
  }

 private:
  void* ptr_;
};

std::vector<double> bounds(const std::vector<double>& want, const std::vector<double>& magnitude,
                           int m, double n) {
  std::vector<double> b(want.size());
  const double r = m == 0 ? 0.0 : std::ldexp(1.0, -m);
  const double subnormal = m == 11 ? std::ldexp(1.0, -25) : 0.0;  // fp16's half spacing there
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = r * std::fabs(want[i]) + (1.0 + r) * (n + 1) * std::ldexp(1.0, -24) * magnitude[i] +
           subnormal;
  }
  return b;
}

// Every element within its bound (NaN, an element never written, fails).
void expect_within(const std::string& what, const std::vector<double>& got,
                   const std::vector<double>& want, const std::vector<double>& bound,
                   int64_t channels) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) <= bound[i]) continue;
    if (first < 0) first = int64_t(i);
    ++bad;
  }
  if (bad == 0) return;
  ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements off; first: index "
                << first << " (row " << first / channels << ", channel " << first % channels
                << ") got " << got[size_t(first)] << ", want " << want[size_t(first)] << " +- "
                << bound[size_t(first)];
}

// The inputs of the three passes and the double reference of each result.
struct Problem {
  Conv2dGeometry g;
  Elem type;
  Values x, w, dy, residual;
  std::vector<float> bias, dw0, db0;
  std::vector<double> y, y_abs, fused, fused_abs, dx, dx_abs, dw, dw_abs, db, db_abs;
};

Problem make_problem(const Conv2dGeometry& g, Elem type, uint64_t seed) {
  Random rng(seed);
  Problem p;
  p.g = g, p.type = type;
  const int64_t ys = g.N * g.P() * g.Q() * g.K, ws = g.K * g.R * g.S;
  p.x = encode(uniform(rng, g.N * g.H * g.W * g.C), type);
  p.w = encode(uniform(rng, ws), type);
  p.dy = encode(uniform(rng, ys), type);
  p.residual = encode(uniform(rng, ys), type);
  p.bias = uniform(rng, g.K), p.dw0 = uniform(rng, ws), p.db0 = uniform(rng, g.K);
  p.y.resize(size_t(ys)), p.y_abs.resize(size_t(ys));
  ref::conv2d_forward_nhwc<double>(g, p.x.value.data(), p.w.value.data(), nullptr, p.y.data());
  ref::conv2d_forward_nhwc<double>(g, p.x.magnitude.data(), p.w.magnitude.data(), nullptr,
                                   p.y_abs.data());
  for (int64_t i = 0; i < ys; ++i) {
    const double b = p.bias[size_t(i % g.K)], r = p.residual.value[size_t(i)];
    p.fused.push_back(std::max(0.0, p.y[size_t(i)] + b + r));
    p.fused_abs.push_back(p.y_abs[size_t(i)] + std::fabs(b) + std::fabs(r));
  }
  p.dx.resize(p.x.value.size()), p.dx_abs.resize(p.x.value.size());
  ref::conv2d_backward_data_nhwc<double>(g, p.dy.value.data(), p.w.value.data(), p.dx.data());
  ref::conv2d_backward_data_nhwc<double>(g, p.dy.magnitude.data(), p.w.magnitude.data(),
                                         p.dx_abs.data());
  p.dw.assign(p.dw0.begin(), p.dw0.end());
  for (float v : p.dw0) p.dw_abs.push_back(std::fabs(v));
  ref::conv2d_backward_filter_nhwc<double>(g, p.x.value.data(), p.dy.value.data(), p.dw.data());
  ref::conv2d_backward_filter_nhwc<double>(g, p.x.magnitude.data(), p.dy.magnitude.data(),
                                           p.dw_abs.data());
  p.db.assign(p.db0.begin(), p.db0.end());
  for (float v : p.db0) p.db_abs.push_back(std::fabs(v));
  for (int64_t i = 0; i < ys; ++i) {
    p.db[size_t(i % g.K)] += p.dy.value[size_t(i)];
    p.db_abs[size_t(i % g.K)] += p.dy.magnitude[size_t(i)];
  }
  return p;
}

namespace depthwise = cuda::depthwise_nhwc;

// Every pass of p twice (bit-identical repeats), each tensor of the element type `offset` bytes
// into its buffer. fp32 also in tf32 and bf16 math (depthwise has no GEMM: the same bits).
// version best: through the dispatch, as the layers; else that version of the direct kernel
// (depthwise::forward, ...; the filter gradient without the bias's).
void check_passes(Context& ctx, const Problem& p, size_t offset,
                  depthwise::Version version = depthwise::Version::best) {
  const Conv2dGeometry& g = p.g;
  const Elem type = p.type;
  const bool f32 = type == Elem::f32;
  const cuda::TcType tc = type == Elem::bf16 ? cuda::TcType::bf16 : cuda::TcType::f16;
  const int m = mantissa_bits(type);
  const bool direct = version != depthwise::Version::best;
  const depthwise::Element element = f32 ? depthwise::Element::f32 : depthwise::element_of(tc);
  const std::string what = describe(g) + " " + elem_name(type) + (offset ? " misaligned" : "") +
                           (direct ? std::string(" ") + depthwise::version_name(version) : "");
  const size_t eb = elem_bytes(type), ys = p.y.size(), xs = p.dx.size(), ws = p.dw.size();
  DeviceBuffer x(xs * eb), w(ws * eb), dy(ys * eb), residual(ys * eb), y(ys * eb), dx(xs * eb),
      bias(size_t(g.K) * 4), dw(ws * 4), db(size_t(g.K) * 4), stats(size_t(g.K) * 8);
  const size_t work_bytes =
      f32 ? sizeof(float) * std::max({cuda::conv2d_forward_nhwc_workspace(g),
                                      cuda::conv2d_backward_data_nhwc_workspace(g),
                                      cuda::conv2d_backward_filter_nhwc_workspace(g), size_t(4)})
          : std::max({cuda::conv2d_tc_forward_workspace(g),
                      cuda::conv2d_tc_backward_data_workspace(g, tc),
                      cuda::conv2d_tc_backward_filter_workspace(g), size_t(16)});
  DeviceBuffer work(work_bytes);
  const std::vector<uint8_t> poison(work_bytes, 0xff), y_nan(ys * eb, 0xff), dx_nan(xs * eb, 0xff);
  x.upload(p.x.bytes.data(), xs * eb, offset), w.upload(p.w.bytes.data(), ws * eb, offset);
  dy.upload(p.dy.bytes.data(), ys * eb, offset);
  residual.upload(p.residual.bytes.data(), ys * eb, offset);
  bias.upload(p.bias.data(), size_t(g.K) * 4);
  const gpu::Stream s = ctx.stream();
  auto* fw = static_cast<float*>(work.at());
  const double rs = double(g.R * g.S), M = double(g.K / g.C), npq = double(g.N * g.P() * g.Q());

  // Forward: fp32 with its bias, 16-bit without an epilogue.
  std::vector<uint8_t> first;
  for (int run = 0; run < 4; ++run) {
    y.upload(y_nan.data(), ys * eb, offset);
    work.upload(poison.data(), work_bytes);
    if (direct) {
      if (run >= 2) break;
      cuda::TcEpilogue plain;
      plain.bias = f32 ? static_cast<const float*>(bias.at()) : nullptr;
      depthwise::forward(g, element, x.at(offset), w.at(offset), y.at(offset), plain, work.at(), s,
                         version);
    } else if (f32) {
      const GemmMath math = run < 2 ? GemmMath::fp32 : run == 2 ? GemmMath::tf32 : GemmMath::bf16;
      cuda::conv2d_forward_nhwc(
          g, static_cast<const float*>(x.at(offset)), static_cast<const float*>(w.at(offset)),
          static_cast<const float*>(bias.at()), static_cast<float*>(y.at(offset)), fw, s, math);
    } else {
      if (run >= 2) break;
      cuda::conv2d_tc_forward(g, tc, x.at(offset), w.at(offset), y.at(offset), {}, work.at(), s);
    }
    const std::vector<uint8_t> got = y.download(ys * eb, offset);
    if (run > 0) {
      EXPECT_EQ(got, first) << what << " forward: run " << run << " differs";
      continue;
    }
    first = got;
    if (f32) {
      std::vector<double> want = p.y, magnitude = p.y_abs;
      for (size_t i = 0; i < ys; ++i) {
        want[i] += p.bias[i % size_t(g.K)], magnitude[i] += std::fabs(p.bias[i % size_t(g.K)]);
      }
      expect_within(what + " forward + bias", decode(got, type), want,
                    bounds(want, magnitude, m, rs + 1), g.K);
    } else {
      expect_within(what + " forward", decode(got, type), p.y, bounds(p.y, p.y_abs, m, rs), g.K);
    }
  }

  // The 16-bit epilogue: bias + residual + ReLU with the channel sums, then the residual in y.
  if (!f32) {
    cuda::TcEpilogue fused;
    fused.bias = static_cast<const float*>(bias.at()), fused.residual = residual.at(offset);
    fused.relu = true;
    fused.sum = static_cast<float*>(stats.at()), fused.sum_squares = fused.sum + g.K;
    const std::vector<uint8_t> stats_nan(size_t(g.K) * 8, 0xff);
    std::vector<uint8_t> stored_bits, first_stats;
    for (int run = 0; run < 3; ++run) {
      y.upload(run < 2 ? y_nan.data() : p.residual.bytes.data(), ys * eb, offset);
      work.upload(poison.data(), work_bytes);
      stats.upload(stats_nan.data(), stats_nan.size());
      fused.residual = run < 2 ? residual.at(offset) : y.at(offset);
      if (direct) {
        depthwise::forward(g, element, x.at(offset), w.at(offset), y.at(offset), fused, work.at(),
                           s, version);
      } else {
        cuda::conv2d_tc_forward(g, tc, x.at(offset), w.at(offset), y.at(offset), fused, work.at(),
                                s);
      }
      const std::vector<uint8_t> got = y.download(ys * eb, offset);
      const std::vector<uint8_t> sums = stats.download(size_t(g.K) * 8);
      if (run > 0) {
        EXPECT_EQ(got, stored_bits) << what << " fused forward: run " << run << " differs";
        EXPECT_EQ(sums, first_stats) << what << " channel sums: run " << run << " differ";
        continue;
      }
      stored_bits = got, first_stats = sums;
      const std::vector<double> stored = decode(got, type);
      expect_within(what + " forward + bias + residual + ReLU", stored, p.fused,
                    bounds(p.fused, p.fused_abs, m, rs + 2), g.K);
      // fp32 sums of what was stored, then of its squares: N*P*Q terms each.
      std::vector<double> want(size_t(2 * g.K)), magnitude(size_t(2 * g.K));
      for (size_t i = 0; i < ys; ++i) {
        const size_t k = i % size_t(g.K);
        want[k] += stored[i], magnitude[k] += std::fabs(stored[i]);
        want[k + size_t(g.K)] += stored[i] * stored[i];
        magnitude[k + size_t(g.K)] += stored[i] * stored[i];
      }
      expect_within(what + " channel sums, then sums of squares", decode(sums, Elem::f32), want,
                    bounds(want, magnitude, 0, npq), 2 * g.K);
    }
  }

  for (int run = 0; run < 2; ++run) {
    dx.upload(dx_nan.data(), xs * eb, offset);
    if (direct) {
      depthwise::backward_data(g, element, dy.at(offset), w.at(offset), dx.at(offset), s, version);
    } else if (f32) {
      cuda::conv2d_backward_data_nhwc(g, static_cast<const float*>(dy.at(offset)),
                                      static_cast<const float*>(w.at(offset)),
                                      static_cast<float*>(dx.at(offset)), fw, s);
    } else {
      cuda::conv2d_tc_backward_data(g, tc, dy.at(offset), w.at(offset), dx.at(offset), work.at(),
                                    s);
    }
    const std::vector<uint8_t> got = dx.download(xs * eb, offset);
    if (run == 1) {
      EXPECT_EQ(got, first) << what << " backward data: a repeat differs";
      break;
    }
    first = got;
    expect_within(what + " backward data", decode(got, type), p.dx,
                  bounds(p.dx, p.dx_abs, m, rs * M), g.C);
  }

  for (int run = 0; run < 2; ++run) {
    dw.upload(p.dw0.data(), ws * 4), db.upload(p.db0.data(), size_t(g.K) * 4);
    work.upload(poison.data(), work_bytes);
    auto* dwf = static_cast<float*>(dw.at());
    if (direct) {
      depthwise::backward_filter(g, element, x.at(offset), dy.at(offset), dwf, work.at(), s,
                                 version);
    } else if (f32) {
      cuda::conv2d_backward_filter_nhwc(g, static_cast<const float*>(x.at(offset)),
                                        static_cast<const float*>(dy.at(offset)), dwf,
                                        static_cast<float*>(db.at()), fw, s);
    } else {
      cuda::conv2d_tc_backward_filter(g, tc, x.at(offset), dy.at(offset), dwf, work.at(), s);
    }
    const std::vector<uint8_t> got = dw.download(ws * 4);
    if (run == 1) {
      EXPECT_EQ(got, first) << what << " backward filter: a repeat differs";
      break;
    }
    first = got;
    expect_within(what + " backward filter", decode(got, Elem::f32), p.dw,
                  bounds(p.dw, p.dw_abs, 0, npq + 1), g.R * g.S);
    if (f32 && !direct) {
      expect_within(what + " backward bias", decode(db.download(size_t(g.K) * 4), Elem::f32), p.db,
                    bounds(p.db, p.db_abs, 0, npq + 1), g.K);
    }
  }
}

const Elem kElems[] = {Elem::f32, Elem::bf16, Elem::f16};

// N C H W K R S pad_h pad_w stride_h stride_w dilation_h dilation_w groups (= C: depthwise).
const std::vector<Conv2dGeometry>& geometries() {
  static const std::vector<Conv2dGeometry> all = {
      {1, 3, 7, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3},       // C = 3, N = 1, odd H, W
      {2, 13, 11, 9, 13, 5, 5, 2, 2, 2, 2, 1, 1, 13},   // C = 13, 5x5, stride 2
      {2, 40, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40},   // C = 40: vectors, 3x3 row walk
      {2, 96, 13, 10, 96, 7, 7, 3, 3, 1, 1, 1, 1, 96},  // ConvNeXt's 7x7, pad 3
      {2, 96, 15, 13, 96, 3, 3, 1, 1, 2, 2, 1, 1, 96},  // stride 2 (data: the gather)
      {2, 40, 10, 9, 40, 3, 3, 2, 2, 1, 1, 2, 2, 40},   // dilation 2: the tap loop
      {2, 16, 9, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 16},    // M = 2
      {2, 8, 6, 5, 24, 3, 3, 1, 1, 2, 2, 1, 1, 8},      // M = 3, stride 2
      {3, 24, 12, 11, 24, 3, 3, 0, 0, 1, 1, 1, 1, 24},  // pad 0
      {2, 32, 9, 9, 32, 5, 5, 2, 2, 2, 2, 1, 1, 32},    // 5x5 stride 2 (EfficientNet)
      {1, 8, 7, 7, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8},       // pad 3 > (R-1)*dil: padding -1
      {2, 24, 8, 12, 24, 3, 5, 1, 2, 1, 2, 1, 1, 24},   // 3x5, stride (1, 2)
      {2, 16, 11, 10, 16, 5, 3, 2, 1, 2, 1, 1, 2, 16},  // 5x3, stride (2, 1), dilation (1, 2)
      {2, 16, 13, 13, 16, 7, 7, 3, 3, 2, 2, 1, 1, 16},  // 7x7 stride 2
      {8, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32},  // N*P*Q = 8192: several slices
      {2, 16, 12, 11, 16, 5, 3, 2, 1, 1, 1, 1, 1, 16},  // 5x3: filter rows in 2 groups
      {2, 40, 11, 13, 40, 5, 5, 2, 2, 1, 1, 1, 1, 40},  // 5x5 stride 1 (filter v3: 4 channels)
      {1, 6, 9, 7, 6, 7, 7, 3, 3, 1, 1, 1, 1, 6},       // C = 6: bf16 filter v3 (2 channels) only
      {1, 8, 5, 1030, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8},    // halo tile: several tiles across a row
      {1, 64, 9, 128, 64, 7, 7, 3, 3, 1, 1, 1, 1, 64},  // halo tile: wide rows, 7x7
      {16, 64, 64, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64},  // pipelined tiles: several a block
      {256, 16, 200, 4, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},  // filter bands: several a block
  };
  return all;
}

TEST(ConvolutionDepthwiseNhwcCuda, EveryPassAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 4100;
  for (const Conv2dGeometry& g : geometries()) {
    for (Elem type : kElems) check_passes(ctx, make_problem(g, type, ++seed), 0);
  }
}

// Every version of the direct kernel on every geometry (a version that does not take one runs v1),
// and production's rule: a pass runs a version that takes it.
TEST(ConvolutionDepthwiseNhwcCuda, EveryVersionAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 4500;
  for (const Conv2dGeometry& g : geometries()) {
    for (Elem type : kElems) {
      const Problem p = make_problem(g, type, ++seed);
      for (depthwise::Version v : {depthwise::Version::v1, depthwise::Version::v2,
                                   depthwise::Version::v3, depthwise::Version::v4}) {
        check_passes(ctx, p, 0, v);
      }
    }
  }
}

TEST(ConvolutionDepthwiseNhwcCuda, VersionsTakeTheirGeometries) {
  using depthwise::Element;
  using depthwise::Pass;
  using depthwise::Version;
  const Conv2dGeometry dw3{64, 144, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144};
  const Conv2dGeometry dw7{64, 96, 56, 56, 96, 7, 7, 3, 3, 1, 1, 1, 1, 96};
  const Conv2dGeometry dilated{2, 40, 10, 9, 40, 3, 3, 2, 2, 1, 1, 2, 2, 40};
  EXPECT_EQ(depthwise::runs(Pass::forward, dw3, Element::bf16, Version::v2), Version::v2);
  EXPECT_EQ(depthwise::runs(Pass::forward, dilated, Element::bf16, Version::v2), Version::v1);
  EXPECT_EQ(depthwise::runs(Pass::filter, dw3, Element::bf16, Version::v3), Version::v1);
  EXPECT_EQ(depthwise::runs(Pass::filter, dw7, Element::bf16, Version::v3), Version::v3);
  EXPECT_EQ(depthwise::runs(Pass::filter, dw7, Element::bf16, Version::v4), Version::v4);
  EXPECT_EQ(depthwise::runs(Pass::filter, dilated, Element::f32, Version::v4), Version::v1);
  EXPECT_EQ(depthwise::narrow_filter_channels(dw7, Element::bf16), 2);
  EXPECT_EQ(depthwise::narrow_filter_channels(dw7, Element::f32), 2);
  for (const Conv2dGeometry& g : geometries()) {
    for (Element type : {Element::f32, Element::bf16, Element::f16}) {
      for (Pass pass : {Pass::forward, Pass::data, Pass::filter}) {
        const Version best = depthwise::choose(pass, g, type);
        EXPECT_EQ(depthwise::runs(pass, g, type, Version::best), best) << describe(g);
      }
    }
  }
}

// Every tensor 1 element past 16-byte alignment: the one-channel path on vector-friendly C.
TEST(ConvolutionDepthwiseNhwcCuda, MisalignedTensorsTakeTheElementPath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 4300;
  for (const Conv2dGeometry& g : {geometries()[2], geometries()[3], geometries()[4]}) {
    for (Elem type : kElems) {
      check_passes(ctx, make_problem(g, type, ++seed), elem_bytes(type));
    }
  }
}

// The dispatch: depthwise geometries name the kernel in every dtype and math; a grouped
// convolution with two channels a group keeps the implicit GEMMs.
TEST(ConvolutionDepthwiseNhwcCuda, DispatchNamesTheKernel) {
  CREMA_REQUIRE_CUDA();
  constexpr ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data,
                                  ConvPass::backward_filter};
  const Conv2dGeometry dw{8, 96, 14, 14, 96, 3, 3, 1, 1, 1, 1, 1, 1, 96};
  const Conv2dGeometry grouped{8, 96, 14, 14, 96, 3, 3, 1, 1, 1, 1, 1, 1, 48};
  for (ConvPass pass : kPasses) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
        EXPECT_STREQ(conv2d_nhwc_kernel(pass, dw, dtype, math), "depthwise_nhwc")
            << conv_pass_name(pass) << " " << dtype_name(dtype);
        EXPECT_STRNE(conv2d_nhwc_kernel(pass, grouped, dtype, math), "depthwise_nhwc")
            << conv_pass_name(pass) << " " << dtype_name(dtype);
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
