// CUDA convolution on 16-bit NHWC tensors (convolution_tc.h): the three passes in bf16 and fp16
// against the double reference (ref::*_nhwc) computed on the same rounded inputs, on awkward
// geometries (N = 1, odd H and W, C = 3 and 5 (element path), C = 64 and 200 (16-byte path,
// many slabs), K not a tile multiple, stride 2, pad 0/1/2/3, dilation 2, 1x1, 3x3, 7x7 stems,
// backward data's output phases at strides 2 and 3 (dilation sharing a factor with the stride or
// not, padding beyond the stride, phases without taps, groups),
// groups with both paths, a filter gradient cut into many slices); outputs poisoned with NaN,
// dw accumulated onto random values; the forward epilogue (bias, residual, ReLU, residual in
// place, the per-channel sums of y and y^2 against sums of the stored y); misaligned pointers (the
// element path); bit-identical repeats. The geometries that the wgmma kernels take on an H100 or
// H200 (convolution_tc_wgmma*_sm90a.cu) on their own shapes: 1x1 with C and K in {8, 64, 72, 256,
// 1024}, rows not a multiple of the 128-row tile, N = 1, a ring lapped several times, the filter
// gradient in one and in many slices with either tensor as the GEMM's rows, stride 2 with the
// images stacked and not, an asymmetric stride; 3x3 and 5x3 at stride 1 (padding, dilation, C =
// 72), 3x3, 4x4 and 5x5 at strides 2, 3 and (2, 1) (odd sizes, dilation, phases of 1 to 4 taps
// and phases without any), the filter gradient of all these and of the strided 1x1s (boxes of 1 x
// 64 to 64 x 1 positions, Q > 64, several slices a tap), whole images a tile (7 x 7 and 6 x 6,
// a partial last tile) and the fallbacks (Q > 128, a single 7 x 7 image, two 6 x 6 phases,
// phases without taps, stride 5, misaligned pointers); on an H100 or H200 each must
// take the kernels it fits (a silent fallback fails); the wgmma epilogue's edges (a partial row
// tile, a partial column tile of 72 or 8 columns, clipped strided pixel blocks) and y, residual and
// dx 4-byte but not 16-byte aligned (mma.sync's pair stores).
//
// Tolerance, per element, from the error analysis of fp32 sums of exact products (16-bit x 16-bit
// products are exact in fp32) and one rounding to the output type (u = 2^-24, m = 8 for bf16
// and 11 for fp16 (round to nearest: relative error <= 2^-m)):
//   |got - y| <= 2^-m |y| + (1 + 2^-m) n u sum|terms|
// where n counts the terms summed into the output (R*S*Cg products + bias + residual forward,
// R*S*Kg data; the filter gradient's fp32 result has no final rounding and n = N*P*Q plus the
// slice sums plus dw's start) and sum|terms| is the same reference on absolute values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test {
namespace {

using cuda::TcType;

// float -> the type's bits, rounded to nearest even (finite inputs well inside the range).
uint16_t to_bits(float v, TcType type) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (type == TcType::bf16) return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const double a = std::fabs(double(v));
  // Quantum 2^(e - 10) for a in [2^e, 2^(e+1)), e >= -14; 2^-24 below (subnormals). Dividing
  // by a power of two is exact and nearbyint rounds to even; a carry into the next binade lands
  // in the exponent field by itself.
  const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
  const int64_t m = int64_t(std::nearbyint(std::ldexp(a, 10 - e)));
  const int64_t bits = a < std::ldexp(1.0, -14) ? m : (int64_t(e + 15) << 10) + (m - 1024);
  return uint16_t(sign | bits);
}

double widen(uint16_t b, TcType type) {
  if (type == TcType::bf16) {
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int exponent = (b >> 10) & 31, mantissa = b & 1023;
  const double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                           : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                            : std::ldexp(1024 + mantissa, exponent - 25);
  return b & 0x8000u ? -magnitude : magnitude;
}

uint16_t nan_bits(TcType type) {
  return type == TcType::bf16 ? 0x7fc0 : 0x7e00;
}

int mantissa_bits(TcType type) {
  return type == TcType::bf16 ? 8 : 11;
}

// Random values in [-1, 1] as the type's bits, and what they are.
struct Values {
  std::vector<uint16_t> bits;
  std::vector<double> value, magnitude;
};
Values random_values(Random& rng, int64_t count, TcType type) {
  Values v;
  for (int64_t i = 0; i < count; ++i) {
    v.bits.push_back(to_bits(float(rng.uniform(-1.0, 1.0)), type));
    v.value.push_back(widen(v.bits.back(), type));
    v.magnitude.push_back(std::fabs(v.value.back()));
  }
  return v;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : ptr_(gpu::device_allocate(bytes + 16)) {}
  ~DeviceBuffer() { gpu::device_free(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // The buffer `offset` bytes in (16-byte aligned at 0; 2 misaligns it for the element path).
  void* at(size_t offset = 0) const { return static_cast<char*>(ptr_) + offset; }
  template <class T>
  void upload(const std::vector<T>& host, size_t offset = 0) {
    gpu::copy(at(offset), host.data(), host.size() * sizeof(T), nullptr);
  }
  template <class T>
  std::vector<T> download(size_t count, size_t offset = 0) const {
    std::vector<T> host(count);
    gpu::copy(host.data(), at(offset), count * sizeof(T), nullptr);
    return host;
  }

 private:
  void* ptr_;
};

// Every element within its bound (NaN, an element never written, fails); the first one off is
// printed with its pixel and channel.
void expect_within(const std::string& what, const std::vector<double>& got,
                   const std::vector<double>& want, const std::vector<double>& bound,
                   int64_t channels) {
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

// The inputs of all three passes and what each must produce.
struct TcProblem {
  Conv2dGeometry g;
  TcType type;
  Values x, w, dy, residual;
  std::vector<float> bias, dw0;
  std::vector<double> y, y_magnitude, y_fused, y_fused_magnitude, dx, dx_magnitude, dw,
      dw_magnitude;
};

TcProblem make_problem(const Conv2dGeometry& g, TcType type, uint64_t seed) {
  Random rng(seed);
  TcProblem p;
  p.g = g, p.type = type;
  const int64_t ys = g.N * g.P() * g.Q() * g.K;
  p.x = random_values(rng, g.N * g.H * g.W * g.C, type);
  p.w = random_values(rng, g.K * g.R * g.S * (g.C / g.groups), type);
  p.dy = random_values(rng, ys, type);
  p.residual = random_values(rng, ys, type);
  for (int64_t k = 0; k < g.K; ++k) p.bias.push_back(float(rng.uniform(-1.0, 1.0)));
  for (size_t i = 0; i < p.w.bits.size(); ++i) p.dw0.push_back(float(rng.uniform(-1.0, 1.0)));
  p.y.resize(size_t(ys)), p.y_magnitude.resize(size_t(ys));
  p.dx.resize(p.x.value.size()), p.dx_magnitude.resize(p.x.value.size());
  ref::conv2d_forward_nhwc<double>(g, p.x.value.data(), p.w.value.data(), nullptr, p.y.data());
  ref::conv2d_forward_nhwc<double>(g, p.x.magnitude.data(), p.w.magnitude.data(), nullptr,
                                   p.y_magnitude.data());
  for (int64_t i = 0; i < ys; ++i) {
    const double b = p.bias[size_t(i % g.K)], r = p.residual.value[size_t(i)];
    p.y_fused.push_back(std::max(0.0, p.y[size_t(i)] + b + r));
    p.y_fused_magnitude.push_back(p.y_magnitude[size_t(i)] + std::fabs(b) + std::fabs(r));
  }
  ref::conv2d_backward_data_nhwc<double>(g, p.dy.value.data(), p.w.value.data(), p.dx.data());
  ref::conv2d_backward_data_nhwc<double>(g, p.dy.magnitude.data(), p.w.magnitude.data(),
                                         p.dx_magnitude.data());
  p.dw.assign(p.dw0.begin(), p.dw0.end());
  for (float v : p.dw0) p.dw_magnitude.push_back(std::fabs(v));
  ref::conv2d_backward_filter_nhwc<double>(g, p.x.value.data(), p.dy.value.data(), p.dw.data());
  ref::conv2d_backward_filter_nhwc<double>(g, p.x.magnitude.data(), p.dy.magnitude.data(),
                                           p.dw_magnitude.data());
  return p;
}

// 2^-m |want| + (1 + 2^-m) n 2^-24 magnitude, per element (m = 0: an fp32 result, no rounding).
std::vector<double> bounds(const std::vector<double>& want, const std::vector<double>& magnitude,
                           int m, double n) {
  std::vector<double> b(want.size());
  const double r = m == 0 ? 0.0 : std::ldexp(1.0, -m);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = r * std::fabs(want[i]) + (1.0 + r) * n * std::ldexp(1.0, -24) * magnitude[i];
  }
  return b;
}

std::vector<double> widened(const std::vector<uint16_t>& bits, TcType type) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = widen(bits[i], type);
  return v;
}

// Every pass of p, twice each (bit-identical repeats); `offset` bytes into every 16-bit buffer
// (2: misaligned, the element path).
void check_passes(Context& ctx, const TcProblem& p, size_t offset,
                  cuda::TcKernels kernels = cuda::TcKernels::best) {
  const Conv2dGeometry& g = p.g;
  const TcType type = p.type;
  const int m = mantissa_bits(type);
  const std::string what =
      describe(g) + " " + cuda::tc_type_name(type) + (offset != 0 ? " misaligned" : "");
  const size_t ys = p.y.size(), xs = p.dx.size(), ws = p.dw.size();
  DeviceBuffer x(xs * 2), w(ws * 2), dy(ys * 2), residual(ys * 2), y(ys * 2), dx(xs * 2),
      bias(size_t(g.K) * 4), dw(ws * 4);
  DeviceBuffer work(std::max({cuda::conv2d_tc_forward_workspace(g),
                              cuda::conv2d_tc_backward_data_workspace(g, type),
                              cuda::conv2d_tc_backward_filter_workspace(g), size_t(16)}));
  x.upload(p.x.bits, offset), w.upload(p.w.bits, offset), dy.upload(p.dy.bits, offset);
  residual.upload(p.residual.bits, offset), bias.upload(p.bias);
  const std::vector<uint16_t> y_nan(ys, nan_bits(type)), dx_nan(xs, nan_bits(type));
  const gpu::Stream s = ctx.stream();
  const double n_forward = double(g.R * g.S * (g.C / g.groups));

  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    y.upload(y_nan, offset);
    cuda::conv2d_tc_forward(g, type, x.at(offset), w.at(offset), y.at(offset), {}, work.at(), s,
                            kernels);
    const std::vector<uint16_t> got = y.download<uint16_t>(ys, offset);
    if (run == 0) {
      expect_within(what + " forward", widened(got, type), p.y,
                    bounds(p.y, p.y_magnitude, m, n_forward), g.K);
    } else {
      EXPECT_EQ(got, first) << what << " forward: a repeat differs";
    }
    first = got;
  }
  DeviceBuffer stats(size_t(g.K) * 8);
  cuda::TcEpilogue fused;
  fused.bias = static_cast<const float*>(bias.at()), fused.residual = residual.at(offset);
  fused.relu = true;
  fused.sum = static_cast<float*>(stats.at()), fused.sum_squares = fused.sum + g.K;
  std::vector<float> first_stats;
  for (int run = 0; run < 2; ++run) {
    y.upload(y_nan, offset);
    stats.upload(std::vector<float>(size_t(2 * g.K), NAN));
    cuda::conv2d_tc_forward(g, type, x.at(offset), w.at(offset), y.at(offset), fused, work.at(), s,
                            kernels);
    const std::vector<float> got = stats.download<float>(size_t(2 * g.K));
    if (run == 1) {
      EXPECT_EQ(got, first_stats) << what << " channel statistics: a repeat differs";
      break;
    }
    first_stats = got;
    const std::vector<double> stored = widened(y.download<uint16_t>(ys, offset), type);
    expect_within(what + " forward + bias + residual + ReLU", stored, p.y_fused,
                  bounds(p.y_fused, p.y_fused_magnitude, m, n_forward + 2), g.K);
    // The statistics are fp32 sums of what was stored: M terms (and each square's rounding).
    std::vector<double> want(size_t(2 * g.K)), magnitude(size_t(2 * g.K));
    for (size_t i = 0; i < ys; ++i) {
      const size_t k = i % size_t(g.K);
      want[k] += stored[i], magnitude[k] += std::fabs(stored[i]);
      want[k + size_t(g.K)] += stored[i] * stored[i];
      magnitude[k + size_t(g.K)] += stored[i] * stored[i];
    }
    expect_within(what + " channel sums, then sums of squares",
                  std::vector<double>(got.begin(), got.end()), want,
                  bounds(want, magnitude, 0, double(ys / size_t(g.K)) + 1), 2 * g.K);
  }

  for (int run = 0; run < 2; ++run) {
    dx.upload(dx_nan, offset);
    cuda::conv2d_tc_backward_data(g, type, dy.at(offset), w.at(offset), dx.at(offset), work.at(), s,
                                  kernels);
    const std::vector<uint16_t> got = dx.download<uint16_t>(xs, offset);
    if (run == 0) {
      expect_within(what + " backward data", widened(got, type), p.dx,
                    bounds(p.dx, p.dx_magnitude, m, double(g.R * g.S * (g.K / g.groups))), g.C);
    } else {
      EXPECT_EQ(got, first) << what << " backward data: a repeat differs";
    }
    first = got;
  }

  const double npq = double(g.N * g.P() * g.Q());
  std::vector<float> first_dw;
  for (int run = 0; run < 2; ++run) {
    dw.upload(p.dw0);
    cuda::conv2d_tc_backward_filter(g, type, x.at(offset), dy.at(offset),
                                    static_cast<float*>(dw.at()), work.at(), s, kernels);
    const std::vector<float> got = dw.download<float>(ws);
    if (run == 0) {
      // Terms: N*P*Q products, at most N*P*Q / 256 + 1 slice sums, dw's start.
      expect_within(what + " backward filter", std::vector<double>(got.begin(), got.end()), p.dw,
                    bounds(p.dw, p.dw_magnitude, 0, npq + std::ceil(npq / 256) + 2),
                    g.R * g.S * (g.C / g.groups));
    } else {
      EXPECT_EQ(got, first_dw) << what << " backward filter: a repeat differs";
    }
    first_dw = got;
  }
}

const TcType kTypes[] = {TcType::bf16, TcType::f16};

// check_passes of every geometry in both 16-bit types on the kernels `kernels` forces (each
// problem seeded from seed + 7, + 14, ...).
void check_each(Context& ctx, const std::vector<Conv2dGeometry>& geometries, uint64_t seed,
                cuda::TcKernels kernels) {
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0, kernels);
  }
}

TEST(ConvolutionTcCuda, EveryPassAgainstReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 64, 9, 11, 72, 3, 3, 1, 1},                // C = 64, N = 1, odd H, W, K = 72 (wide)
      {2, 3, 19, 17, 10, 7, 7, 3, 3, 2, 2},          // a stem in small: 7x7, stride 2, C = 3
      {2, 16, 13, 11, 24, 3, 3, 0, 0, 2, 2},         // stride 2, pad 0 (strided data gather)
      {2, 24, 11, 9, 16, 3, 3, 2, 2, 1, 1, 2, 2},    // dilation 2, pad 2
      {2, 64, 7, 9, 136, 1, 1},                      // 1x1 stride 1 (a GEMM), 2 column tiles
      {2, 32, 9, 9, 40, 1, 1, 0, 0, 2, 2},           // strided 1x1 (ResNet's downsampling)
      {2, 16, 8, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2: Cg = 8, Kg = 12 (data: element)
      {1, 12, 9, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups 2: Cg = 6, every pass element-wise
      {3, 200, 6, 5, 8, 3, 3, 1, 1},                 // inner 1800 (57 slabs); data: 2 wide tiles
      {8, 8, 32, 32, 16, 3, 3, 1, 1},                // N*P*Q = 8192: filter slices
      {1, 5, 4, 4, 3, 3, 3, 3, 3, 3, 2},             // outputs that read only padding
      {2, 8, 5, 6, 3, 3, 3, 1, 1},                   // K = 3
      {1, 3, 29, 31, 16, 7, 7, 3, 3, 2, 2},          // the 7x7 stem, pad 3, odd sizes
      // Backward data by output phase at stride > 1 (taps per phase in rows x columns):
      {2, 136, 9, 9, 136, 3, 3, 1, 1, 2, 2},         // ResNet's 3x3 s2: 1x1..2x2; wide
      {2, 16, 11, 10, 24, 3, 3, 2, 2, 2, 2, 2, 2},   // dilation 2: odd rows take no tap
      {2, 16, 13, 12, 24, 5, 4, 2, 1, 3, 2, 2, 1},   // stride (3, 2), dilation (2, 1)
      {2, 16, 9, 9, 24, 4, 4, 3, 3, 2, 2},           // 4x4, pad 3 > stride
      {2, 32, 9, 8, 48, 3, 3, 1, 1, 2, 2, 1, 1, 2},  // groups 2 at stride 2
      {2, 64, 10, 11, 72, 2, 2, 0, 0, 3, 3},         // a phase row with no taps, 2x2 s3
  };
  uint64_t seed = 300;
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0);
  }
}

// Whether the device runs the wgmma kernels (compute capability 9.0): there every fitting 1x1
// geometry must take them (a silent fallback to the mma.sync kernels fails).
bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

TEST(ConvolutionTcCuda, WgmmaGeometries) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  struct Case {
    Conv2dGeometry g;
    bool forward, data, filter;  // fits the wgmma kernels
  };
  const std::vector<Case> cases = {
      // N C  H   W   K  R  S  pad_h pad_w stride_h stride_w
      {{1, 64, 9, 11, 64, 1, 1}, true, true, true},    // N = 1, 99 rows: a partial tile, BN 64
      {{2, 256, 9, 13, 72, 1, 1}, true, true, true},   // 4 slabs over BN 128's 3 stages; K = 72
      {{3, 72, 10, 10, 256, 1, 1}, true, true, true},  // C = 72: a slab of 8 channels + 56 zeros
      {{2, 8, 7, 9, 8, 1, 1}, true, true, true},       // C = K = 8
      {{1, 1024, 5, 7, 64, 1, 1}, true, true, true},   // 16 slabs: the ring lapped 4 times
      {{8, 64, 16, 16, 64, 1, 1}, true, true, true},   // 16 row tiles; filter: 4 slices
      {{4, 16, 40, 40, 24, 1, 1}, true, true, true},   // filter: 13 slices of 8 slabs
      {{4, 64, 14, 14, 72, 1, 1, 0, 0, 2, 2}, true, true, true},  // stride 2, images stacked
      {{3, 72, 13, 11, 64, 1, 1, 0, 0, 2, 2}, true, true, true},  // stride 2, odd H: unstacked
      {{2, 16, 9, 5, 16, 1, 1, 0, 0, 2, 1}, true, true, true},    // stride (2, 1)
      {{2, 16, 5, 9, 16, 1, 1, 0, 0, 1, 2}, false, true, true},   // stride (1, 2): Q * 2 > W
      {{1, 8, 3, 300, 8, 1, 1, 0, 0, 2, 2}, false, true, true},   // Q = 150 > 128
      {{2, 64, 5, 7, 60, 1, 1}, false, false, false},             // K = 60: not a multiple of 8
      // The epilogue's edges: 133 rows (a tile of 5), 200 channels (a last column tile of 72 of
      // BN 128, forward and data), a strided data pixel block clipped by odd H and W.
      {{1, 200, 7, 19, 200, 1, 1}, true, true, true},
      {{2, 200, 11, 9, 136, 1, 1, 0, 0, 2, 2}, true, true, true},
      // padded 1x1: y 9 x 9 (81 rows, one image a tile: no); data: dx 7 x 7, two images a tile
      {{2, 64, 7, 7, 64, 1, 1, 1, 1}, false, true, true},
      // Filters of taps at stride 1: forward and data with rows of one image a tile, tap offsets
      // read through the TMA's zero fill (the padding); the filter gradient one tap a block, boxes
      // of bh x bw output positions (x at the tap's offset).
      {{2, 64, 16, 16, 72, 3, 3, 1, 1}, true, true, true},             // 8 rows of 16: 128
      {{1, 72, 20, 12, 64, 3, 3, 1, 1}, true, true, true},             // C = 72: boxes span taps
      {{1, 256, 10, 12, 136, 3, 3, 1, 1}, true, true, true},           // 36 slabs, 2 column tiles
      {{1, 64, 9, 14, 200, 3, 3, 1, 1}, true, true, true},             // 126 rows, K = 200
      {{2, 16, 13, 24, 8, 3, 3, 2, 2, 1, 1, 2, 2}, true, true, true},  // dilation 2, pad 2
      {{1, 8, 9, 30, 16, 5, 3, 2, 1}, true, true, true},               // 5 x 3, pads 2 and 1
      {{8, 64, 16, 16, 64, 3, 3, 1, 1}, true, true, true},             // filter: 4 slices a tap
      // Images of at most 64 pixels: whole images a tile (7 x 7: two, 98 rows; 6 x 6: three).
      {{2, 32, 7, 7, 32, 3, 3, 1, 1}, true, true, true},
      {{5, 16, 6, 6, 24, 3, 3, 1, 1}, true, true, true},            // a last tile of two images
      {{3, 16, 14, 14, 16, 3, 3, 1, 1, 2, 2}, true, true, true},    // 7 x 7 outputs and phases
      {{1, 32, 7, 7, 32, 3, 3, 1, 1}, false, false, true},          // one 7 x 7 image: 49 rows
      {{1, 8, 3, 70, 8, 3, 3, 1, 1}, false, false, true},           // Q = 70: 2 boxes a row
      {{2, 16, 9, 1, 16, 3, 1, 1, 0}, false, false, true},          // Q = 1: boxes 1 x 64
      {{2, 32, 12, 12, 32, 3, 3, 1, 1, 2, 2}, false, false, true},  // 6 x 6, N = 2: 72 rows
      // Taps at a stride: forward and filter gradient read x through TMA boxes stepping the
      // stride; data runs one GEMM per output phase (each phase's rows must fill the tiles).
      {{1, 16, 23, 31, 24, 3, 3, 1, 1, 2, 2}, true, true, true},   // odd H, W; a 4-row tile
      {{2, 72, 19, 21, 40, 5, 5, 2, 2, 2, 2}, true, false, true},  // 5 x 5, C = 72; data: 9 x 10
      // Dilation 2 at stride 2: the odd rows' phase has no tap (data: mma.sync).
      {{1, 8, 30, 40, 16, 3, 3, 2, 2, 2, 2, 2, 2}, true, false, true},
      {{1, 16, 20, 12, 8, 3, 3, 1, 1, 2, 1}, true, true, true},     // stride (2, 1)
      {{2, 128, 28, 28, 136, 3, 3, 1, 1, 2, 2}, true, true, true},  // ResNet's 3x3s2, smaller
      {{1, 16, 36, 30, 24, 3, 3, 1, 1, 3, 3}, true, true, true},    // stride 3: a tap a phase
      {{2, 24, 24, 24, 16, 4, 4, 1, 1, 2, 2}, true, true, true},    // 4 x 4: 2 x 2 taps a phase
      {{1, 8, 20, 260, 8, 3, 3, 1, 1, 2, 2}, false, false, true},   // Q = 130 > 128
      {{8, 64, 32, 32, 64, 3, 3, 1, 1, 2, 2}, true, true, true},    // filter: slices a tap
      {{1, 8, 26, 26, 8, 3, 3, 1, 1, 5, 5}, false, false, false},   // stride 5 > 4
  };
  uint64_t seed = 900;
  for (const Case& c : cases) {
    const auto wgmma = cuda::TcKernels::wgmma;
    EXPECT_EQ(cuda::conv2d_tc_forward_uses_wgmma(c.g, wgmma), c.forward && hopper())
        << describe(c.g);
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_wgmma(c.g, wgmma), c.data && hopper())
        << describe(c.g);
    EXPECT_EQ(cuda::conv2d_tc_backward_filter_uses_wgmma(c.g, wgmma), c.filter && hopper())
        << describe(c.g);
    // Each family where it runs (`best` picks between them: both must be right).
    for (TcType type : kTypes) {
      check_passes(ctx, make_problem(c.g, type, seed += 7), 0, wgmma);
      check_passes(ctx, make_problem(c.g, type, seed += 7), 0, cuda::TcKernels::mma_sync);
    }
  }
  // Misaligned pointers: the element path, whatever the device.
  const Conv2dGeometry g{2, 64, 5, 7, 72, 1, 1};
  for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, 31), 2);
}

// The 256-column tile (TcKernels::wgmma_wide; two wgmma m64n128 a k step, one block an SM):
// forward and data over 256 columns, over 264 and 200 (a partial last tile), a 1x1 at stride 2
// (data: a strided pixel block per row), 16 slabs lapping the 4-stage ring, a stride-2 3x3's data
// phases in one launch; the whole epilogue
// (bias, residual, ReLU, channel sums) and the repeats through check_passes.
TEST(ConvolutionTcCuda, WideTile) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 16, 16, 256, 3, 3, 1, 1},        // 256 columns forward; data over 64: BN 64
      {1, 264, 10, 12, 264, 3, 3, 1, 1},       // 264 both ways: a last tile of 8 columns
      {2, 200, 11, 9, 320, 1, 1, 0, 0, 2, 2},  // strided 1x1: 320 forward, 200 data
      {1, 1024, 5, 7, 256, 1, 1},              // 16 slabs: the ring lapped 4 times
      {2, 136, 14, 14, 64, 3, 3, 1, 1, 2, 2},  // data over 136: four phases in one launch
  };
  check_each(ctx, geometries, 1700, cuda::TcKernels::wgmma_wide);
}

// Persistent blocks (TcKernels::wgmma_persistent; two an SM, each walking units, its producer
// filling the next unit's stages under this one's epilogue; `best` takes them for large layers
// of at most 4 slabs): 294 units of 2 slabs forward and 1 data, more than two an SM on a 132-SM
// GPU (the blocks walk 2 or 3, lapping the 3-stage ring); a strided 1x1 (data: a pixel block a
// row); a 3x3 with the whole epilogue; a split reduction (64 units of parts, finish_parts_kernel
// after); a stride-2 3x3's data phases in one launch.
TEST(ConvolutionTcCuda, PersistentBlocks) {
  CREMA_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "the wgmma kernels need compute capability 9.0";
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {12, 128, 56, 56, 64, 1, 1},             // 294 units: blocks walk several
      {4, 64, 28, 28, 136, 1, 1, 0, 0, 2, 2},  // strided 1x1
      {2, 64, 16, 16, 72, 3, 3, 1, 1},         // taps, a last column tile of 8
      {2, 512, 7, 7, 512, 3, 3, 1, 1},         // 8 blocks: the reduction split in 8
      {2, 136, 14, 14, 64, 3, 3, 1, 1, 2, 2},  // data: four phases in one launch
  };
  EXPECT_GT(cuda::tc::wgmma_forward_partial_bytes(geometries[3]), 0u);
  check_each(ctx, geometries, 2900, cuda::TcKernels::wgmma_persistent);
}

// Backward data at stride 2 with its phases in one launch (even H and W: four phases of one
// extent; stride (2, 1): two), here also split: 2 images of 7 x 7 phases make 1 tile a phase, the
// 3x3's phases take 1, 2, 2 and 4 taps of 8 slabs each, so the 32-slab phase sets parts of 8 and
// the shorter phases leave parts empty (zeros summed).
TEST(ConvolutionTcCuda, DataPhasesInOneLaunch) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Conv2dGeometry> geometries = {
      // N C  H   W  K  R  S  pad_h pad_w stride_h stride_w
      {2, 64, 14, 14, 512, 3, 3, 1, 1, 2, 2},
      {2, 16, 28, 14, 72, 3, 3, 1, 1, 2, 1},
  };
  uint64_t seed = 2300;
  for (const Conv2dGeometry& g : geometries) {
    EXPECT_EQ(cuda::conv2d_tc_backward_data_uses_wgmma(g), hopper()) << describe(g);
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0);
  }
  EXPECT_GT(cuda::tc::wgmma_backward_data_partial_bytes(geometries[0]), 0u);
}

// Which tile `best` takes: 256 columns only for long reductions over whole 256-column tiles
// that still give every SM a block; 64 where 128-column tiles would leave SMs idle; and where a
// reduction is split. The split itself runs in every test above whose geometry makes fewer than
// 128 tiles over at least 8 slabs (WgmmaGeometries' 1024-channel 1x1 and 36-slab 3x3, ...).
TEST(ConvolutionTcCuda, TileColumns) {
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 256, 36, 132), 256);  // a large 3x3 256 -> 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 256, 1, 132), 128);   // a 1x1 64 -> 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 384, 36, 132), 128);  // 384: not whole tiles
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(100, 256, 36, 132), 128);  // 100 blocks of 256
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(60, 256, 36, 132), 64);    // 120 blocks of 128
  EXPECT_EQ(cuda::tc::wgmma_tile_columns(800, 64, 36, 132), 64);
  // ResNet-50 at batch 128: layer3's 3x3 (256 -> 256 at 14 x 14) wide both ways; its 1x1s not.
  const Conv2dGeometry conv2{128, 256, 14, 14, 256, 3, 3, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_forward_tile_columns(conv2, 132), 256);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_tile_columns(conv2, 132), 256);
  const Conv2dGeometry conv3{128, 256, 14, 14, 1024, 1, 1};
  EXPECT_EQ(cuda::tc::wgmma_forward_tile_columns(conv3, 132), 128);
  // Split reductions: layer4's 3x3 at batch 16 (8 row tiles, 72 slabs) takes room for its parts,
  // the large layers and the short reductions none.
  const Conv2dGeometry small{16, 512, 7, 7, 512, 3, 3, 1, 1};
  EXPECT_GT(cuda::tc::wgmma_forward_partial_bytes(small), 0u);
  EXPECT_GT(cuda::tc::wgmma_backward_data_partial_bytes(small), 0u);
  EXPECT_EQ(cuda::tc::wgmma_forward_partial_bytes(conv2), 0u);
  EXPECT_EQ(cuda::tc::wgmma_backward_data_partial_bytes(conv3), 0u);
  EXPECT_EQ(cuda::tc::wgmma_forward_partial_bytes(Conv2dGeometry{1, 64, 9, 11, 64, 1, 1}), 0u);
}

// Fused channel statistics write their partials into the workspace: without one, a named error
// before anything runs (the workspace now starts with the split reductions' room).
TEST(ConvolutionTcCuda, StatisticsNeedTheWorkspace) {
  const Conv2dGeometry g{2, 64, 8, 8, 64, 3, 3, 1, 1};
  float sums[2 * 64];
  cuda::TcEpilogue epilogue;
  epilogue.sum = sums, epilogue.sum_squares = sums + 64;
  try {
    cuda::conv2d_tc_forward(g, TcType::bf16, nullptr, nullptr, nullptr, epilogue, nullptr, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel statistics need the workspace"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConvolutionTcCuda, MisalignedPointersTakeTheElementPath) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry g{2, 16, 7, 6, 24, 3, 3, 1, 1};
  for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, 17), 2);
}

// y, residual and dx 4 bytes past a 16-byte boundary, the operands aligned: the wgmma kernels'
// epilogue writes 16 bytes a lane, so these take mma.sync's pair stores (and must be right).
TEST(ConvolutionTcCuda, OutputsAlignedToFourBytes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {{2, 64, 9, 15, 136, 1, 1}, {1, 64, 16, 16, 72, 3, 3, 1, 1}};
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) {
      const TcProblem p = make_problem(g, type, 41);
      const std::string what = describe(g) + " " + cuda::tc_type_name(type) + " outputs at +4";
      const int m = mantissa_bits(type);
      const size_t ys = p.y.size(), xs = p.dx.size();
      DeviceBuffer x(xs * 2), w(p.w.bits.size() * 2), dy(ys * 2), residual(ys * 2), y(ys * 2),
          dx(xs * 2), bias(size_t(g.K) * 4);
      DeviceBuffer work(std::max({cuda::conv2d_tc_forward_workspace(g),
                                  cuda::conv2d_tc_backward_data_workspace(g, type), size_t(16)}));
      x.upload(p.x.bits), w.upload(p.w.bits), dy.upload(p.dy.bits), bias.upload(p.bias);
      residual.upload(p.residual.bits, 4);
      y.upload(std::vector<uint16_t>(ys, nan_bits(type)), 4);
      dx.upload(std::vector<uint16_t>(xs, nan_bits(type)), 4);
      cuda::TcEpilogue fused;
      fused.bias = static_cast<const float*>(bias.at()), fused.residual = residual.at(4);
      fused.relu = true;
      cuda::conv2d_tc_forward(g, type, x.at(), w.at(), y.at(4), fused, work.at(), ctx.stream(),
                              cuda::TcKernels::wgmma);
      expect_within(what + " forward + bias + residual + ReLU",
                    widened(y.download<uint16_t>(ys, 4), type), p.y_fused,
                    bounds(p.y_fused, p.y_fused_magnitude, m, double(g.R * g.S * g.C) + 2), g.K);
      cuda::conv2d_tc_backward_data(g, type, dy.at(), w.at(), dx.at(4), work.at(), ctx.stream(),
                                    cuda::TcKernels::wgmma);
      expect_within(what + " backward data", widened(dx.download<uint16_t>(xs, 4), type), p.dx,
                    bounds(p.dx, p.dx_magnitude, m, double(g.R * g.S * g.K)), g.C);
    }
  }
}

// residual == y: each element is read, then written, by the one thread that owns it (the 1x1
// geometry on the wgmma kernels on an H100 or H200).
TEST(ConvolutionTcCuda, ResidualInPlace) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const Conv2dGeometry geometries[] = {{2, 32, 9, 7, 48, 3, 3, 1, 1}, {2, 64, 9, 15, 136, 1, 1}};
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) {
      const TcProblem p = make_problem(g, type, 23);
      const size_t ys = p.y.size();
      DeviceBuffer x(p.x.bits.size() * 2), w(p.w.bits.size() * 2), y(ys * 2);
      x.upload(p.x.bits), w.upload(p.w.bits), y.upload(p.residual.bits);
      std::vector<double> want(ys), magnitude(ys);
      for (size_t i = 0; i < ys; ++i) {
        want[i] = p.y[i] + p.residual.value[i];
        magnitude[i] = p.y_magnitude[i] + std::fabs(p.residual.value[i]);
      }
      cuda::TcEpilogue ep;
      ep.residual = y.at();
      cuda::conv2d_tc_forward(g, type, x.at(), w.at(), y.at(), ep, nullptr, ctx.stream());
      expect_within(describe(g) + " " + cuda::tc_type_name(type) + " residual in place",
                    widened(y.download<uint16_t>(ys), type), want,
                    bounds(want, magnitude, mantissa_bits(type), double(g.R * g.S * g.C) + 1), g.K);
    }
  }
}

}  // namespace
}  // namespace crema::kernels::conv_test
