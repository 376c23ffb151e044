// What the few-channel backward-data tests share (convolution_few_channels_nhwc_cuda_test.cpp,
// convolution_few_channels_mma_cuda_test.cpp): a problem drawn on bf16, fp16 or f32 values with
// its double reference and a per-element bound, and a check of one family's backward data
// against it -- dx poisoned with NaN first, every element within its bound, dy and dx optionally
// misaligned, and a repeat bit-identical.
//
// Bound per element: the kernels sum R*S*K exact products in fp32 (a 16-bit product, and a
// product of tf32-rounded floats, is exact in fp32), so |got - want| <= 2^-m |want| + (1 + 2^-m)
// n 2^-24 sum|terms| with n = R*S*K and m = 8 (bf16), 11 (fp16) for the one rounding at the
// store, no m term for f32. `tf32`: the reference reads both operands rounded to tf32 (to nearest,
// ties away: cvt.rna), as the tensor cores are fed.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/float16.h"
#include "core/random.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc.h"
#include "tests/kernels/convolution_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels::conv_test::few_channels {

using cuda::GemmMath;
using cuda::TcKernels;
using cuda::TcType;

enum class Kind { bf16, f16, f32 };

inline const char* name_of(Kind kind) {
  return kind == Kind::bf16 ? "bf16" : kind == Kind::f16 ? "f16" : "f32";
}

struct Problem {
  Conv2dGeometry g;
  Kind kind;
  std::vector<float> dy, w;  // the values as stored
  std::vector<uint16_t> dy16, w16;
  std::vector<double> dx, bound;
};

// A float rounded to tf32 as cvt.rna does (finite values).
inline float round_tf32(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&v, &u, 4);
  return v;
}

inline Problem make(const Conv2dGeometry& g, Kind kind, uint64_t seed, bool tf32 = false) {
  Random rng(seed);
  Problem p;
  p.g = g;
  p.kind = kind;
  auto draw = [&](int64_t n, std::vector<float>& values, std::vector<uint16_t>& bits) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = float(rng.uniform(-1.0, 1.0));
      if (kind == Kind::bf16) {
        bits.push_back(f32_to_bf16_bits(v));
        values.push_back(bf16_to_f32(bits.back()));
      } else if (kind == Kind::f16) {
        bits.push_back(f32_to_f16_bits(v));
        values.push_back(f16_to_f32(bits.back()));
      } else {
        values.push_back(v);
      }
    }
  };
  draw(g.N * g.P() * g.Q() * g.K, p.dy, p.dy16);
  draw(g.K * g.R * g.S * g.C, p.w, p.w16);
  auto widen = [tf32](const std::vector<float>& v, bool magnitude) {
    std::vector<double> d;
    for (float f : v) {
      const double x = double(tf32 ? round_tf32(f) : f);
      d.push_back(magnitude ? std::fabs(x) : x);
    }
    return d;
  };
  const int64_t xs = g.N * g.H * g.W * g.C;
  std::vector<double> magnitude(size_t(xs), 0.0);
  p.dx.assign(size_t(xs), 0.0);
  ref::conv2d_backward_data_nhwc<double>(g, widen(p.dy, false).data(), widen(p.w, false).data(),
                                         p.dx.data());
  ref::conv2d_backward_data_nhwc<double>(g, widen(p.dy, true).data(), widen(p.w, true).data(),
                                         magnitude.data());
  const double r = kind == Kind::bf16  ? std::ldexp(1.0, -8)
                   : kind == Kind::f16 ? std::ldexp(1.0, -11)
                                       : 0.0;
  const double n = double(g.R * g.S * g.K);
  for (int64_t i = 0; i < xs; ++i) {
    p.bound.push_back(r * std::fabs(p.dx[size_t(i)]) +
                      (1.0 + r) * n * std::ldexp(1.0, -24) * magnitude[size_t(i)]);
  }
  return p;
}

// Device bytes as a float tensor (16-byte aligned), `offset` bytes in.
struct Bytes {
  Tensor t;
  Bytes(Context& ctx, size_t bytes) : t(ctx.empty({int64_t(bytes / 4 + 8)})) {}
  char* at(size_t offset) { return reinterpret_cast<char*>(t.data<float>()) + offset; }
};

// Backward data with `kernels` (f32: in `math`), dy and dx `offset` bytes off 16-byte alignment;
// twice: the repeat must be bit-identical.
inline void check(Context& ctx, const Problem& p, TcKernels kernels, size_t offset,
                  GemmMath math = GemmMath::fp32) {
  const Conv2dGeometry& g = p.g;
  const bool f32 = p.kind == Kind::f32;
  const size_t bytes = f32 ? 4 : 2, xs = p.dx.size();
  Bytes dy(ctx, p.dy.size() * bytes + 16), w(ctx, p.w.size() * bytes), dx(ctx, xs * bytes + 16);
  // The direct kernel takes none; the implicit GEMMs it is compared with do.
  Bytes work(ctx, f32 ? cuda::conv2d_backward_data_nhwc_workspace(g) * 4
                      : cuda::conv2d_tc_backward_data_workspace(g, TcType::bf16));
  const void* dy_host = f32 ? static_cast<const void*>(p.dy.data()) : p.dy16.data();
  const void* w_host = f32 ? static_cast<const void*>(p.w.data()) : p.w16.data();
  gpu::copy(dy.at(offset), dy_host, p.dy.size() * bytes, nullptr);
  gpu::copy(w.at(0), w_host, p.w.size() * bytes, nullptr);
  const std::string what = describe(g) + " " + name_of(p.kind) +
                           (offset ? " misaligned by " + std::to_string(offset) : "");
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    const std::vector<uint8_t> poison(xs * bytes, 0xff);  // NaN in every type
    gpu::copy(dx.at(offset), poison.data(), poison.size(), nullptr);
    if (f32) {
      cuda::conv2d_backward_data_nhwc(
          g, reinterpret_cast<const float*>(dy.at(offset)), reinterpret_cast<const float*>(w.at(0)),
          reinterpret_cast<float*>(dx.at(offset)), reinterpret_cast<float*>(work.at(0)),
          ctx.stream(), math, kernels);
    } else {
      cuda::conv2d_tc_backward_data(g, p.kind == Kind::bf16 ? TcType::bf16 : TcType::f16,
                                    dy.at(offset), w.at(0), dx.at(offset), work.at(0), ctx.stream(),
                                    kernels);
    }
    std::vector<uint8_t> got(xs * bytes);
    gpu::copy(got.data(), dx.at(offset), got.size(), ctx.stream());
    ctx.synchronize();
    if (run == 1) {
      EXPECT_TRUE(got == first) << what << ": a repeat differs";
      break;
    }
    int64_t bad = 0, at = -1;
    double value = 0.0;
    for (size_t i = 0; i < xs; ++i) {
      uint16_t half = 0;
      float single = 0.0f;
      if (f32) {
        std::memcpy(&single, got.data() + 4 * i, 4);
      } else {
        std::memcpy(&half, got.data() + 2 * i, 2);
      }
      const double v = f32                    ? double(single)
                       : p.kind == Kind::bf16 ? double(bf16_to_f32(half))
                                              : double(f16_to_f32(half));
      if (std::fabs(v - p.dx[i]) <= p.bound[i]) continue;  // NaN fails here
      if (at < 0) at = int64_t(i), value = v;
      ++bad;
    }
    EXPECT_EQ(bad, 0) << what << ": first " << at << ": got " << value << ", want "
                      << (at < 0 ? 0.0 : p.dx[size_t(at)]) << " +- "
                      << (at < 0 ? 0.0 : p.bound[size_t(at)]);
    first = got;
  }
}

}  // namespace crema::kernels::conv_test::few_channels
