// cuda::gemm_16bit and the Tensor-level gemm on bf16 and f16 tensors: every layout, awkward
// shapes (M, N, K odd, K not a multiple of 8, K = 1), the skinny products that split K (a weight
// gradient's few tiles and long K; M = 1; N = 1), alpha/beta blends over NaN-poisoned C, a bias,
// C f32 or 16-bit, in every way (wgmma_in_place and wgmma_repacked on compute capability 9.0,
// tf32_mma / bf16_mma on widened operands anywhere); wgmma_in_place's MN-major operands read in
// place (M, N multiples of 8, any K) and its fallback (a copy of an operand whose rows are not
// 16-byte multiples) and workspace; the bits repeat; what it refuses it names. Also the bias
// gradient from 16-bit dy.
//
// The reference: ref::gemm<double> on the stored 16-bit values (exact), then alpha, the bias and
// beta C in double. Each version's products (check_operands) are held per element to the worst
// case of fp32 sums of exact products, |C - ref| <= 2^-m |ref| + (1 + 2^-m) (K + 3) 2^-24 sum|terms|
// (m: 8 bf16, 11 f16, none for C f32; sum|terms| from |A| |B|, |bias|, |beta C|): the statistical
// rules below held the mean of the errors and failed at K = 20,000 on an H200 (4.7e-5 against
// 4.4e-5 norm-wise for f16 via tf32_mma). The Tensor-level calls keep those rules:
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
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemm/gemm.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::GemmVersion;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float representable(float v, DType t) {
  return t == DType::bf16 ? to_f32(to_bf16(v)) : t == DType::f16 ? to_f32(to_f16(v)) : v;
}

// A host tensor of `t` holding `values` (each representable in t).
Tensor host_tensor(const Shape& shape, DType t, const std::vector<float>& values) {
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
Tensor device_tensor(Context& ctx, const Shape& shape, DType t, const std::vector<float>& values) {
  Tensor d = ctx.empty(shape, t);
  d.copy_from(host_tensor(shape, t, values));
  return d;
}

std::vector<float> random_representable(size_t n, DType t, uint64_t seed) {
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

Operands make_operands(Dims d, bool trans_a, bool trans_b, DType type, uint64_t seed) {
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

std::string describe(const Operands& o, DType c_type, const Blend& blend, const char* version) {
  return std::string(dtype_name(o.type)) + " -> " + dtype_name(c_type) + " " +
         (o.trans_a ? "T" : "N") + (o.trans_b ? "T" : "N") + " M=" + std::to_string(o.d.M) +
         " N=" + std::to_string(o.d.N) + " K=" + std::to_string(o.d.K) +
         " alpha=" + std::to_string(blend.alpha) + " beta=" + std::to_string(blend.beta) +
         (blend.bias ? " bias " : " ") + version;
}

// Holds `got` (C as floats) to the reference of the header; `roundings`: how many roundings to
// c_type separate them (2 when `want` was rounded too).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, DType c_type,
                  int64_t K, const std::string& what, int roundings = 1,
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
    const double unit = c_type == DType::f32   ? 0.0
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

// C as the call leaves it, from C0 (values of c_type; NaN where beta == 0), on `version`, with a
// NaN-poisoned workspace.
std::vector<float> run(Context& ctx, const Operands& o, DType c_type, const Blend& blend,
                       const std::vector<float>& c0, const std::vector<float>& bias,
                       GemmVersion version) {
  const Dims d = o.d;
  const Tensor a = device_tensor(ctx, {d.M * d.K}, o.type, o.a);
  const Tensor b = device_tensor(ctx, {d.K * d.N}, o.type, o.b);
  Tensor c = device_tensor(ctx, {d.M * d.N}, c_type, c0);
  const Tensor bias_t = device_tensor(ctx, {d.N}, DType::f32, bias);
  const size_t floats = cuda::gemm_16bit_workspace(o.trans_a, o.trans_b, d.M, d.N, d.K, version);
  Tensor workspace = ctx.empty({int64_t(std::max<size_t>(floats, 1))});
  ctx.fill(workspace, kNaN);
  cuda::gemm_16bit(o.type, c_type, o.trans_a, o.trans_b, d.M, d.N, d.K, blend.alpha, a.raw(),
                   o.trans_a ? d.M : d.K, b.raw(), o.trans_b ? d.K : d.N, blend.beta, c.raw(), d.N,
                   blend.bias ? bias_t.data<float>() : nullptr, ctx.stream(), version,
                   floats > 0 ? workspace.data<float>() : nullptr);
  ctx.synchronize();
  return c.to_vector();
}

// Every (C type, blend) on `version` for one layout of one shape.
void check_operands(Context& ctx, const Operands& o, GemmVersion version, uint64_t seed) {
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
      expect_close(run(ctx, o, c_type, blend, c0, bias, version), want, c_type, d.K,
                   describe(o, c_type, blend, cuda::gemm_version_name(version)), 1, &magnitude);
    }
  }
}

bool on_sm90() {
  return cuda::best_16bit_version(DType::bf16) == GemmVersion::wgmma_in_place;
}

// The versions a GPU runs: the wgmma ways where it can, and the widened mma.sync way everywhere.
std::vector<GemmVersion> versions(DType type) {
  std::vector<GemmVersion> out{GemmVersion::tf32_mma};
  if (type == DType::bf16) out.push_back(GemmVersion::bf16_mma);
  if (on_sm90()) {
    out.push_back(GemmVersion::wgmma_repacked);
    out.push_back(GemmVersion::wgmma_in_place);
  }
  return out;
}

void check_shape(Context& ctx, Dims d, uint64_t seed) {
  for (DType type : {DType::bf16, DType::f16}) {
    for (int t = 0; t < 4; ++t) {
      const Operands o = make_operands(d, t & 1, t & 2, type, seed + uint64_t(t));
      for (GemmVersion v : versions(type)) check_operands(ctx, o, v, seed + uint64_t(t));
    }
  }
}

TEST(Gemm16bitCuda, AwkwardShapesEveryLayout) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // K = 1, odd extents, K not a multiple of 8 (both operands copied and zero-padded), K a
  // multiple of 8 (K-major operands read in place), several 128 x 256 tiles with edges, a long K
  // over several laps of the ring.
  const Dims shapes[] = {{1, 1, 1},      {7, 5, 3},       {33, 65, 71},
                         {129, 257, 72}, {300, 520, 200}, {65, 7, 1000}};
  uint64_t seed = 1600;
  for (const Dims& d : shapes) check_shape(ctx, d, seed += 16);
}

TEST(Gemm16bitCuda, InPlaceMnMajorOperands) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // wgmma_in_place reads A [K,M] in place when M is a multiple of 8 and B [K,N] when N is (their
  // rows are then 16-byte multiples), whatever K; the others are copied (M = 1 TN, N = 1 NN). K =
  // 8 and 24 (less than one 64-deep slab), K = 13 (the copy engine's zeros past K, MN-major),
  // tiles past the edges (200 = 128 + 72, 136 = 128 + 8: the second tile's upper box of A lies
  // past M and is not loaded; 320 = 256 + 64: three of B's four boxes are not), a K of several
  // laps of the ring. Every layout, both types, C f32 and 16-bit, with and without a bias.
  const Dims shapes[] = {{8, 8, 8},   {136, 264, 8}, {72, 200, 24},     {72, 136, 13},
                         {1, 64, 40}, {64, 1, 24},   {200, 320, 1000}};
  uint64_t seed = 2100;
  for (const Dims& d : shapes) check_shape(ctx, d, seed += 16);
}

TEST(Gemm16bitCuda, InPlaceWorkspaceIsTheFallbackAndTheSplitOnly) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  if (!on_sm90()) GTEST_SKIP() << "wgmma_in_place runs on sm_90 only";
  const GemmVersion in_place = GemmVersion::wgmma_in_place;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    // Rows of 16-byte multiples, no split: nothing to copy, no workspace (t5 copies MN-major ones).
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 8192, 8192, 8192, in_place), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 200704, 384, 96, in_place), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 200704, 384, 96, GemmVersion::wgmma_repacked) > 0,
              ta || !tb)
        << t;
    // A padded leading dimension that is not a multiple of 8: that operand's K-major copy, rows
    // of K rounded up to 8 (2 bf16 to a float).
    const int64_t lda_ok = ta ? 64 : 24, ldb_ok = tb ? 24 : 128;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, lda_ok, ldb_ok), 0u) << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, ta ? 66 : 21, ldb_ok),
              size_t(64 * 24 / 2))
        << t;
    EXPECT_EQ(cuda::gemm_16bit_workspace(ta, tb, 64, 128, 20, in_place, lda_ok, tb ? 22 : 130),
              size_t(128 * 24 / 2))
        << t;
  }
  // ConvNeXt-T's first weight gradient (dW = dy^T x over 200,704 positions): the split's parts
  // alone, where t5 also copied both operands (~190 MB).
  const int splits = cuda::gemm_16bit_splits(true, false, 384, 96, 200704, in_place);
  EXPECT_GT(splits, 1);
  EXPECT_EQ(cuda::gemm_16bit_workspace(true, false, 384, 96, 200704, in_place),
            size_t(splits) * 384 * 96);
}

TEST(Gemm16bitCuda, SkinnyProductsSplitK) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // A weight gradient's shape (C 384 x 96: 3 tiles of 128 x 256, K long; K = 9999 ragged), one
  // row of C, one column of C.
  const Dims shapes[] = {{384, 96, 20000}, {384, 96, 9999}, {1, 300, 9000}, {200, 1, 5000}};
  uint64_t seed = 1700;
  for (const Dims& d : shapes) {
    if (on_sm90()) {
      // The shapes are there to split: a plan without a split would leave the path untested.
      for (GemmVersion v : {GemmVersion::wgmma_repacked, GemmVersion::wgmma_in_place}) {
        EXPECT_GT(cuda::gemm_16bit_splits(true, false, d.M, d.N, d.K, v), 1)
            << d.M << " x " << d.N << " x " << d.K << " " << cuda::gemm_version_name(v);
      }
    }
    check_shape(ctx, d, seed += 16);
  }
}

TEST(Gemm16bitCuda, SplitKRepeatsBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  if (!on_sm90()) GTEST_SKIP() << "the split runs on sm_90 only";
  // A split weight gradient (both operands MN-major) and an unsplit NN product (B MN-major) with a
  // 16-bit C, on both wgmma ways.
  struct Case {
    Dims d;
    bool ta, tb;
    DType c_type;
  };
  for (const Case& k : {Case{{384, 96, 20000}, true, false, DType::f32},
                        Case{{264, 520, 3000}, false, false, DType::bf16}}) {
    const Operands o = make_operands(k.d, k.ta, k.tb, DType::bf16, 1800);
    const std::vector<float> c0 = random_representable(size_t(k.d.M * k.d.N), k.c_type, 1801);
    const std::vector<float> bias = random_representable(size_t(k.d.N), DType::f32, 1802);
    const Blend blend{1.0f, 1.0f, true};
    for (GemmVersion version : {GemmVersion::wgmma_in_place, GemmVersion::wgmma_repacked}) {
      const std::vector<float> first = run(ctx, o, k.c_type, blend, c0, bias, version);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const std::vector<float> again = run(ctx, o, k.c_type, blend, c0, bias, version);
        ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0)
            << cuda::gemm_version_name(version) << " M=" << k.d.M << " repeat " << repeat;
      }
    }
  }
}

TEST(Gemm16bitCuda, TensorLevelMatchesTheCpuReference) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0)), cpu;
  // An inner product's three GEMMs at a small ConvNeXt-like shape: y = x W^T + b (16-bit y),
  // dW += dy^T x (f32 dW, beta 1, split), dx = dy W (16-bit dx).
  const int64_t P = 3000, C = 24, H = 96;
  for (DType type : {DType::bf16, DType::f16}) {
    const auto x = random_representable(size_t(P * C), type, 1900);
    const auto w = random_representable(size_t(H * C), type, 1901);
    const auto dy = random_representable(size_t(P * H), type, 1902);
    const auto b = random_representable(size_t(H), DType::f32, 1903);
    const auto dw0 = random_representable(size_t(H * C), DType::f32, 1904);
    struct Call {
      bool ta, tb;
      const std::vector<float>*a, *b;
      Shape sa, sb, sc;
      DType c_type;
      float beta;
      const std::vector<float>* c0;
      bool bias;
      int64_t K;
    };
    const std::vector<float> none(size_t(P * std::max(H, C)), kNaN);
    const Tensor bias_g = device_tensor(gpu, {H}, DType::f32, b);
    const Tensor bias_c = host_tensor({H}, DType::f32, b);
    const Call calls[] = {
        {false, true, &x, &w, {P, C}, {H, C}, {P, H}, type, 0.0f, &none, true, C},
        {true, false, &dy, &x, {P, H}, {P, C}, {H, C}, DType::f32, 1.0f, &dw0, false, P},
        {false, false, &dy, &w, {P, H}, {H, C}, {P, C}, type, 0.0f, &none, false, H}};
    for (const Call& k : calls) {
      const std::vector<float> c0(k.c0->begin(), k.c0->begin() + shape_numel(k.sc));
      Tensor cg = device_tensor(gpu, k.sc, k.c_type, c0);
      Tensor cc = host_tensor(k.sc, k.c_type, c0);
      gemm(gpu, k.ta, k.tb, 1.0f, device_tensor(gpu, k.sa, type, *k.a),
           device_tensor(gpu, k.sb, type, *k.b), k.beta, cg, cuda::GemmMath::fp32,
           k.bias ? &bias_g : nullptr);
      gemm(cpu, k.ta, k.tb, 1.0f, host_tensor(k.sa, type, *k.a), host_tensor(k.sb, type, *k.b),
           k.beta, cc, cuda::GemmMath::fp32, k.bias ? &bias_c : nullptr);
      gpu.synchronize();
      const std::vector<float> want_f = cc.to_vector();
      const std::vector<double> want(want_f.begin(), want_f.end());
      // The CPU's C is itself rounded once: a 16-bit C may differ by one rounding on each side.
      expect_close(cg.to_vector(), want, k.c_type, k.K,
                   std::string("tensor level ") + dtype_name(type) + (k.ta ? " T" : " N") +
                       (k.tb ? "T" : "N"),
                   2);
    }
  }
}

TEST(Gemm16bitCuda, RefusesWhatItCannotRunWithTheReason) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Tensor a = ctx.empty({256}, DType::bf16), c = ctx.empty({256}, DType::f16);
  const auto message = [&](DType ab, DType ct, GemmVersion v, int64_t lda, int64_t offset) {
    try {
      const auto* base = static_cast<const uint16_t*>(a.raw()) + offset;
      cuda::gemm_16bit(ab, ct, false, true, 8, 8, 8, 1.0f, base, lda, a.raw(), 8, 0.0f, c.raw(), 8,
                       nullptr, ctx.stream(), v, nullptr);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  const auto expect_has = [](const std::string& text, const char* part) {
    EXPECT_NE(text.find(part), std::string::npos) << text;
  };
  expect_has(message(DType::bf16, DType::f16, GemmVersion::tf32_mma, 8, 0),
             "C must be f32 or the operands' bf16, got f16");
  expect_has(message(DType::f32, DType::f32, GemmVersion::tf32_mma, 8, 0),
             "operands must be bf16 or f16, got f32");
  expect_has(message(DType::f16, DType::f16, GemmVersion::bf16_mma, 8, 0),
             "bf16_mma would round f16 operands to bf16");
  expect_has(message(DType::bf16, DType::bf16, GemmVersion::ffma_tuned, 8, 0),
             "does not read 16-bit operands");
  expect_has(message(DType::bf16, DType::bf16, GemmVersion::tf32_mma, 8, 0),
             "needs a 16-byte aligned workspace");
  if (on_sm90()) {
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_repacked, 12, 0),
               "a multiple of 8");
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_repacked, 8, 1),
               "16-byte aligned");
    // wgmma_in_place copies an operand with rows of 12 (the workspace the plan for lda = 12 asks
    // for is missing here), and refuses a misaligned base.
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_in_place, 12, 0),
               "lda=12, ldb=8) needs a 16-byte aligned workspace");
    expect_has(message(DType::bf16, DType::bf16, GemmVersion::wgmma_in_place, 8, 1),
               "A [M,K] is read in place and must be 16-byte aligned");
  }
}

TEST(Gemm16bitCuda, BiasGradientFrom16bitDy) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  // dbias += column sums of dy: a weight gradient's long M (row chunks over the grid) and a
  // short one; fp32 sums of exact 16-bit values, held to the double sum within 1e-5 of the sum of
  // magnitudes; the chunks' order fixed: the same bits again.
  for (DType type : {DType::bf16, DType::f16}) {
    const Dims sizes[] = {{20000, 96, 0}, {3, 7, 0}, {1000, 1, 0}};
    for (const Dims& size : sizes) {
      const int64_t M = size.M, N = size.N;
      const auto dy = random_representable(size_t(M * N), type, 2000);
      const auto db0 = random_representable(size_t(N), DType::f32, 2001);
      std::vector<float> first;
      for (int repeat = 0; repeat < 2; ++repeat) {
        Tensor db = device_tensor(ctx, {N}, DType::f32, db0);
        accumulate_bias_rows(ctx, device_tensor(ctx, {M, N}, type, dy), db);
        ctx.synchronize();
        const std::vector<float> got = db.to_vector();
        if (repeat == 0) {
          first = got;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0);
        }
        for (int64_t n = 0; n < N; ++n) {
          double want = db0[size_t(n)], magnitude = std::fabs(want);
          for (int64_t m = 0; m < M; ++m) {
            want += dy[size_t(m * N + n)];
            magnitude += std::fabs(dy[size_t(m * N + n)]);
          }
          EXPECT_NEAR(got[size_t(n)], want, 1e-5 * magnitude) << dtype_name(type) << " M=" << M;
        }
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
