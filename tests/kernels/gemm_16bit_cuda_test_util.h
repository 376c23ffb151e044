// The helpers of the cuda::gemm_16bit tests (gemm_16bit_cuda_test.cpp,
// gemm_16bit_in_place_cuda_test.cpp): operands of representable 16-bit values, the exact product
// in double, a call on any version with a NaN-poisoned workspace (and rows padded with NaN), and
// the bound each element is held to.
//
// The reference: ref::gemm<double> on the stored 16-bit values (exact), then alpha, the bias and
// beta C in double. Each version's products (check_operands) are held per element to the worst
// case of fp32 sums of exact products, |C - ref| <= 2^-m |ref| + (1 + 2^-m) (K + 3) 2^-24
// sum|terms| (m: 8 bf16, 11 f16, none for C f32; sum|terms| from |A| |B|, |bias|, |beta C|): the
// statistical rules below held the mean of the errors and failed at K = 20,000 on an H200 (4.7e-5
// against 4.4e-5 norm-wise for f16 via tf32_mma). The Tensor-level calls keep those rules:
//   C f32: the products of 16-bit values are exact in fp32 (8 x 8 or 11 x 11 significant bits),
//     so fp32 accumulation is all that differs: ||C - ref|| / ||ref|| <= 1e-5 (gemm_bf16's rule,
//     tests/kernels/gemm_cuda_test_util.h), scaled by sqrt(K / 1024) above K = 1024 (the error of
//     an fp32 sum of K random-sign terms grows like sqrt(K) relative to it).
//   C bf16 / f16: one rounding to nearest of the fp32 result on top, at most half a unit in the
//     last place: per element |C - ref| <= 2^-8 |ref| (bf16: 8 significant bits) or 2^-11 |ref|
//     (f16: 11), plus the fp32 term as an absolute allowance: 1e-5 sqrt(max(1, K / 1024)) times
//     the RMS of ref bounds the errors' RMS, and the largest of E roughly normal errors lies
//     within sqrt(2 ln E) of it (4.6 for the 36,864 elements of 384 x 96: at K = 20,000 an fp32
//     sum's error reached 2.3e-3 on an H200, past the RMS term alone). Truncating instead of
//     rounding errs up to a whole unit and fails.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/float16.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::gemm16 {

using cuda::GemmVersion;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline float representable(float v, DType t) {
  return t == DType::bf16 ? to_f32(to_bf16(v)) : t == DType::f16 ? to_f32(to_f16(v)) : v;
}

// A host tensor of `t` holding `values` (each representable in t).
inline Tensor host_tensor(const Shape& shape, DType t, const std::vector<float>& values) {
  Tensor h(shape, t);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == DType::bf16) {
      h.data<bf16_t>()[i] = to_bf16(values[i]);
    } else if (t == DType::f16) {
      h.data<f16_t>()[i] = to_f16(values[i]);
    } else {
      h.data<float>()[i] = values[i];
    }
  }
  return h;
}
inline Tensor device_tensor(Context& ctx, const Shape& shape, DType t,
                            const std::vector<float>& values) {
  Tensor d = ctx.empty(shape, t);
  d.copy_from(host_tensor(shape, t, values));
  return d;
}

inline std::vector<float> random_representable(size_t n, DType t, uint64_t seed) {
  Random rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = representable(float(rng.uniform(-1.0, 1.0)), t);
  return v;
}

struct Dims {
  int64_t M, N, K;
};
struct Blend {
  float alpha, beta;
  bool bias;
};

// One layout of one shape: the operands (stored as op(.) says), the exact product in double.
struct Operands {
  Dims d;
  bool trans_a, trans_b;
  DType type;
  std::vector<float> a, b;
  std::vector<double> product;    // op(A) op(B), M x N
  std::vector<double> magnitude;  // |op(A)| |op(B)|: the sums of the terms' magnitudes
};

inline Operands make_operands(Dims d, bool trans_a, bool trans_b, DType type, uint64_t seed) {
  Operands o{d, trans_a, trans_b, type, {}, {}, {}, {}};
  o.a = random_representable(size_t(d.M * d.K), type, seed);
  o.b = random_representable(size_t(d.K * d.N), type, seed + 1);
  const std::vector<double> a(o.a.begin(), o.a.end()), b(o.b.begin(), o.b.end());
  o.product.assign(size_t(d.M * d.N), 0.0);
  ref::gemm<double>(trans_a, trans_b, d.M, d.N, d.K, 1.0, a.data(), trans_a ? d.M : d.K, b.data(),
                    trans_b ? d.K : d.N, 0.0, o.product.data(), d.N);
  std::vector<double> abs_a(a), abs_b(b);
  for (double& v : abs_a) v = std::fabs(v);
  for (double& v : abs_b) v = std::fabs(v);
  o.magnitude.assign(size_t(d.M * d.N), 0.0);
  ref::gemm<double>(trans_a, trans_b, d.M, d.N, d.K, 1.0, abs_a.data(), trans_a ? d.M : d.K,
                    abs_b.data(), trans_b ? d.K : d.N, 0.0, o.magnitude.data(), d.N);
  return o;
}

inline std::string describe(const Operands& o, DType c_type, const Blend& blend,
                            const char* version) {
  return std::string(dtype_name(o.type)) + " -> " + dtype_name(c_type) + " " +
         (o.trans_a ? "T" : "N") + (o.trans_b ? "T" : "N") + " M=" + std::to_string(o.d.M) +
         " N=" + std::to_string(o.d.N) + " K=" + std::to_string(o.d.K) +
         " alpha=" + std::to_string(blend.alpha) + " beta=" + std::to_string(blend.beta) +
         (blend.bias ? " bias " : " ") + version;
}

// Holds `got` (C as floats) to the reference of the header; `roundings`: how many roundings to
// c_type separate them (2 when `want` was rounded too).
inline void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                         DType c_type, int64_t K, const std::string& what, int roundings = 1,
                         const std::vector<double>* magnitude = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double accumulation = 1e-5 * std::sqrt(std::max(1.0, double(K) / 1024.0));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " is " << got[i];
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (magnitude != nullptr) {  // the worst case of fp32 sums: per element, no statistics
    const double unit = c_type == DType::f32    ? 0.0
                        : c_type == DType::bf16 ? std::ldexp(1.0, -8)
                                                : std::ldexp(1.0, -11);
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double bound = unit * std::fabs(want[i]) +
                           (1.0 + unit) * double(K + 3) * std::ldexp(1.0, -24) * (*magnitude)[i];
      if (std::fabs(got[i] - want[i]) > bound && bad++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " " << got[i] << " vs " << want[i] << " +- "
                      << bound;
      }
    }
    EXPECT_EQ(bad, 0) << what;
    return;
  }
  if (c_type == DType::f32) {
    EXPECT_LE(std::sqrt(diff) / (std::sqrt(norm) + 1e-30), accumulation) << what;
    return;
  }
  const double unit =
      roundings * (c_type == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11));
  const double tail = std::sqrt(2.0 * std::log(std::max(2.0, double(got.size()))));
  const double absolute = tail * accumulation * std::sqrt(norm / double(got.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = unit * std::fabs(want[i]) + absolute;
    if (std::fabs(got[i] - want[i]) > bound && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " " << got[i] << " vs " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// `values` (rows x cols, dense) in rows `cols + pad` apart, the pad NaN (read, it would show).
inline std::vector<float> padded(const std::vector<float>& values, int64_t rows, int64_t cols,
                                 int64_t pad) {
  std::vector<float> out(size_t(rows * (cols + pad)), kNaN);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(values.begin() + r * cols, cols, out.begin() + r * (cols + pad));
  }
  return out;
}

// C as the call leaves it, from C0 (values of c_type; NaN where beta == 0), on `version`, with a
// NaN-poisoned workspace; `pad` more elements (NaN) at the end of each row of A and of B.
inline std::vector<float> run(Context& ctx, const Operands& o, DType c_type, const Blend& blend,
                              const std::vector<float>& c0, const std::vector<float>& bias,
                              GemmVersion version, int64_t pad = 0) {
  const Dims d = o.d;
  const int64_t a_rows = o.trans_a ? d.K : d.M, a_cols = o.trans_a ? d.M : d.K;
  const int64_t b_rows = o.trans_b ? d.N : d.K, b_cols = o.trans_b ? d.K : d.N;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad;
  const Tensor a = device_tensor(ctx, {a_rows * lda}, o.type, padded(o.a, a_rows, a_cols, pad));
  const Tensor b = device_tensor(ctx, {b_rows * ldb}, o.type, padded(o.b, b_rows, b_cols, pad));
  Tensor c = device_tensor(ctx, {d.M * d.N}, c_type, c0);
  const Tensor bias_t = device_tensor(ctx, {d.N}, DType::f32, bias);
  const size_t floats =
      cuda::gemm_16bit_workspace(o.trans_a, o.trans_b, d.M, d.N, d.K, version, lda, ldb);
  Tensor workspace = ctx.empty({int64_t(std::max<size_t>(floats, 1))});
  ctx.fill(workspace, kNaN);
  cuda::gemm_16bit(o.type, c_type, o.trans_a, o.trans_b, d.M, d.N, d.K, blend.alpha, a.raw(), lda,
                   b.raw(), ldb, blend.beta, c.raw(), d.N,
                   blend.bias ? bias_t.data<float>() : nullptr, ctx.stream(), version,
                   floats > 0 ? workspace.data<float>() : nullptr);
  ctx.synchronize();
  return c.to_vector();
}

// Every (C type, blend) on `version` for one layout of one shape (rows of A and B `pad` longer).
inline void check_operands(Context& ctx, const Operands& o, GemmVersion version, uint64_t seed,
                           int64_t pad = 0) {
  const Dims d = o.d;
  const std::vector<float> bias = random_representable(size_t(d.N), DType::f32, seed + 7);
  for (DType c_type : {DType::f32, o.type}) {
    for (const Blend& blend :
         {Blend{1.0f, 0.0f, false}, Blend{0.5f, 1.0f, true}, Blend{-1.5f, 0.25f, true}}) {
      std::vector<float> c0 = random_representable(size_t(d.M * d.N), c_type, seed + 9);
      if (blend.beta == 0.0f) std::fill(c0.begin(), c0.end(), kNaN);
      std::vector<double> want(o.product.size()), magnitude(o.product.size());
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] = double(blend.alpha) * o.product[i];
        magnitude[i] = std::fabs(double(blend.alpha)) * o.magnitude[i];
        if (blend.bias) {
          want[i] += bias[i % size_t(d.N)];
          magnitude[i] += std::fabs(bias[i % size_t(d.N)]);
        }
        if (blend.beta != 0.0f) {
          want[i] += double(blend.beta) * c0[i];
          magnitude[i] += std::fabs(double(blend.beta) * c0[i]);
        }
      }
      expect_close(run(ctx, o, c_type, blend, c0, bias, version, pad), want, c_type, d.K,
                   describe(o, c_type, blend, cuda::gemm_version_name(version)) + " pad " +
                       std::to_string(pad),
                   1, &magnitude);
    }
  }
}

inline bool on_sm90() {
  return cuda::best_16bit_version(DType::bf16) == GemmVersion::wgmma_in_place;
}

// The versions a GPU runs: the wgmma ways where it can, and the widened mma.sync way everywhere.
inline std::vector<GemmVersion> versions(DType type) {
  std::vector<GemmVersion> out{GemmVersion::tf32_mma};
  if (type == DType::bf16) out.push_back(GemmVersion::bf16_mma);
  if (on_sm90()) {
    out.push_back(GemmVersion::wgmma_repacked);
    out.push_back(GemmVersion::wgmma_in_place);
  }
  return out;
}

inline void check_shape(Context& ctx, Dims d, uint64_t seed) {
  for (DType type : {DType::bf16, DType::f16}) {
    for (int t = 0; t < 4; ++t) {
      const Operands o = make_operands(d, t & 1, t & 2, type, seed + uint64_t(t));
      for (GemmVersion v : versions(type)) check_operands(ctx, o, v, seed + uint64_t(t));
    }
  }
}

}  // namespace crema::kernels::gemm16
