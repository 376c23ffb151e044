// What the 16-bit NHWC convolution tests share (convolution_tc_cuda_test.cpp: the passes on
// awkward geometries, the fallbacks, the epilogue's edges; convolution_tc_wgmma_cuda_test.cpp: the
// wgmma kernels' rarer launches): random problems in bf16 or fp16 with their double references
// (ref::*_nhwc on the same rounded inputs), device buffers, and check_passes, which runs the
// three passes on the kernels a TcKernels forces (outputs poisoned with NaN, dw accumulated onto
// random values, the forward's whole epilogue with its channel sums, bit-identical repeats).
//
//
// Tolerance, per element, from the error analysis of fp32 sums of exact products (16-bit x 16-bit
// products are exact in fp32) and one rounding to the output type (u = 2^-24, m = 8 for bf16
// and 11 for fp16 (round to nearest: relative error <= 2^-m)):
//   |got - y| <= 2^-m |y| + (1 + 2^-m) n u sum|terms|
// where n counts the terms summed into the output (R*S*Cg products + bias + residual forward,
// R*S*Kg data; the filter gradient's fp32 result has no final rounding and n = N*P*Q plus the
// slice sums plus dw's start) and sum|terms| is the same reference on absolute values.
#pragma once

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

using cuda::TcType;

// float -> the type's bits, rounded to nearest even (finite inputs well inside the range).
inline uint16_t to_bits(float v, TcType type) {
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

inline double widen(uint16_t b, TcType type) {
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

inline uint16_t nan_bits(TcType type) {
  return type == TcType::bf16 ? 0x7fc0 : 0x7e00;
}

inline int mantissa_bits(TcType type) {
  return type == TcType::bf16 ? 8 : 11;
}

// Random values in [-1, 1] as the type's bits, and what they are.
struct Values {
  std::vector<uint16_t> bits;
  std::vector<double> value, magnitude;
};
inline Values random_values(Random& rng, int64_t count, TcType type) {
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
inline void expect_within(const std::string& what, const std::vector<double>& got,
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

inline TcProblem make_problem(const Conv2dGeometry& g, TcType type, uint64_t seed) {
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
inline std::vector<double> bounds(const std::vector<double>& want,
                                  const std::vector<double>& magnitude, int m, double n) {
  std::vector<double> b(want.size());
  const double r = m == 0 ? 0.0 : std::ldexp(1.0, -m);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = r * std::fabs(want[i]) + (1.0 + r) * n * std::ldexp(1.0, -24) * magnitude[i];
  }
  return b;
}

inline std::vector<double> widened(const std::vector<uint16_t>& bits, TcType type) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = widen(bits[i], type);
  return v;
}

// Every pass of p, twice each (bit-identical repeats); `offset` bytes into every 16-bit buffer
// (2: misaligned, the element path).
inline void check_passes(Context& ctx, const TcProblem& p, size_t offset,
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

inline constexpr TcType kTypes[] = {TcType::bf16, TcType::f16};

// check_passes of every geometry in both 16-bit types on the kernels `kernels` forces (each
// problem seeded from seed + 7, + 14, ...).
inline void check_each(Context& ctx, const std::vector<Conv2dGeometry>& geometries, uint64_t seed,
                       cuda::TcKernels kernels) {
  for (const Conv2dGeometry& g : geometries) {
    for (TcType type : kTypes) check_passes(ctx, make_problem(g, type, seed += 7), 0, kernels);
  }
}

// Whether the device runs the wgmma kernels (compute capability 9.0): there every fitting 1x1
// geometry must take them (a silent fallback to the mma.sync kernels fails).
inline bool hopper() {
  return gpu::device_description(gpu::current_device()).find(", sm_90,") != std::string::npos;
}

}  // namespace crema::kernels::conv_test
