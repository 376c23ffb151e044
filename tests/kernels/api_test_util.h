// What the CPU and CUDA tests of the primitive API (kernels/api/) share: tensors placed in a
// buffer by strides (contiguous, a transposed view, a sub-region of a larger buffer, arbitrary
// strides: reversed dim order, gaps, an offset; NHWC), and the check every primitive gets:
//   - f32 on the context against the f64 reference (the API on the CPU in f64, which runs each
//     kernel's ref::), alpha 1, beta 0 on a NaN-poisoned output;
//   - the blends beta = 0 on NaN, beta = 1 on random values, alpha = 0.5 with beta = 0.25, on a
//     contiguous and on a strided output: alpha * ref + beta * prior;
//   - every strided variant of inputs and output at once equal, bit for bit, to the contiguous
//     result (GEMM: within tolerance, Case::strided_exact); the gaps of the inputs hold NaN (a read
//     of one shows) and the output's gaps keep their sentinel (a write to one shows).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/api/primitives.h"

namespace crema::kernels::api::testing {

// channels_last: NHWC strides for 4-D tensors (others stay packed). mixed: the first input
// channels-last, the other inputs packed, the output a sub-region (so an op with an NHWC path
// gathers the others to NHWC and stages its output).
enum class Variant { contiguous, transposed, subregion, arbitrary, channels_last, mixed };
inline const char* variant_name(Variant v) {
  switch (v) {
    case Variant::contiguous:
      return "contiguous";
    case Variant::transposed:
      return "transposed";
    case Variant::subregion:
      return "subregion";
    case Variant::arbitrary:
      return "arbitrary";
    case Variant::channels_last:
      return "channels_last";
    case Variant::mixed:
      return "mixed";
  }
  return "?";
}

// A tensor placed in its own buffer: `desc` views `buffer` at `offset` with `strides`.
struct Placed {
  Tensor buffer;
  TensorDesc desc;
  int64_t offset = 0;
};

inline double get(const Tensor& host, int64_t i) {
  return host.dtype() == DType::f64 ? host.data<double>()[i] : double(host.data<float>()[i]);
}
inline void put(Tensor& host, int64_t i, double v) {
  if (host.dtype() == DType::f64) {
    host.data<double>()[i] = v;
  } else {
    host.data<float>()[i] = float(v);
  }
}

// The buffer offset of each logical (row-major) element of d placed at `offset`.
inline std::vector<int64_t> offsets(const Shape& dims, const std::vector<int64_t>& strides,
                                    int64_t offset) {
  std::vector<int64_t> out(size_t(shape_numel(dims)));
  for (size_t f = 0; f < out.size(); ++f) {
    int64_t rest = int64_t(f), o = offset;
    for (size_t k = dims.size(); k-- > 0;) {
      o += (rest % dims[k]) * strides[k];
      rest /= dims[k];
    }
    out[f] = o;
  }
  return out;
}

// `values` (row-major over dims) placed by variant v; every other element of the buffer is `gap`.
inline Placed place(Context& ctx, const std::vector<double>& values, const Shape& dims, Variant v,
                    DType dtype, double gap) {
  const size_t n = dims.size();
  std::vector<size_t> order(n);  // outermost first
  std::iota(order.begin(), order.end(), size_t(0));
  if (v == Variant::transposed && n >= 2) std::swap(order[n - 2], order[n - 1]);
  if (v == Variant::arbitrary) std::reverse(order.begin(), order.end());
  if (v == Variant::channels_last && n == 4) order = {0, 2, 3, 1};
  const int64_t pad = v == Variant::subregion ? 2 : v == Variant::arbitrary ? 1 : 0;
  int64_t step = v == Variant::arbitrary ? 2 : 1;
  std::vector<int64_t> strides(n);
  for (size_t i = n; i-- > 0;) {
    strides[order[i]] = step;
    step *= dims[order[i]] + pad;
  }
  int64_t offset = v == Variant::arbitrary ? 3 : 0;
  if (v == Variant::subregion) offset = std::accumulate(strides.begin(), strides.end(), int64_t(0));
  const int64_t size = offset + step;
  Tensor host({size}, dtype);
  for (int64_t i = 0; i < size; ++i) put(host, i, gap);
  const std::vector<int64_t> at = offsets(dims, strides, offset);
  for (size_t f = 0; f < at.size(); ++f) put(host, at[f], values[f]);
  Placed p;
  p.buffer = ctx.empty({size}, dtype);
  p.buffer.copy_from(host);
  p.offset = offset;
  p.desc = TensorDesc::strided(static_cast<char*>(p.buffer.raw()) + offset * dtype_size(dtype),
                               dtype, ctx.device(), dims, strides);
  return p;
}

inline Tensor host_copy(const Placed& p) {
  Tensor host(p.buffer.shape(), p.buffer.dtype());
  host.copy_from(p.buffer);
  return host;
}

// The logical values of p's view, row-major.
inline std::vector<double> read(const Placed& p) {
  const Tensor host = host_copy(p);
  std::vector<double> out;
  for (int64_t o : offsets(p.desc.dims, p.desc.strides, p.offset)) out.push_back(get(host, o));
  return out;
}

// Whether every element outside p's view still equals `gap`.
inline bool gaps_kept(const Placed& p, double gap) {
  const Tensor host = host_copy(p);
  std::vector<bool> inside(size_t(host.numel()), false);
  for (int64_t o : offsets(p.desc.dims, p.desc.strides, p.offset)) inside[size_t(o)] = true;
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (!inside[size_t(i)] && get(host, i) != gap) return false;
  }
  return true;
}

// One primitive call: its input dims, output dims, and the call on descriptors.
using Run = std::function<void(Context& ctx, double alpha, const std::vector<TensorDesc>& in,
                               double beta, const TensorDesc& out)>;
struct Case {
  Case(std::string name_, std::vector<Shape> inputs_, Shape output_, Run run_)
      : name(std::move(name_)),
        inputs(std::move(inputs_)),
        output(std::move(output_)),
        run(std::move(run_)) {}
  std::string name;
  std::vector<Shape> inputs;
  Shape output;
  Run run;
  double tolerance = 1e-4;     // f32 against f64: |got - want| <= tol * (1 + |want|)
  std::vector<bool> positive;  // per input: values in [0.5, 1.5] instead of [-1, 1]
  std::vector<bool> packed;    // per input: a packed-only parameter (never strided)
  // Strided variants equal the packed result bit for bit; false where a strided operand takes
  // another kernel path (GEMM reads a transposed view by flipping its transpose flag, which may
  // sum in another order): then within tolerance of the packed result.
  bool strided_exact = true;
  // Channels-last tensors run the kernel's NHWC path (convolution, pooling, spatial batch norm),
  // which may sum in another order: the channels_last variant is then within tolerance.
  bool nhwc_path = false;
};

inline std::vector<std::vector<double>> case_inputs(const Case& c) {
  std::mt19937_64 gen(std::hash<std::string>()(c.name) & 0xffff);
  std::vector<std::vector<double>> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const bool pos = i < c.positive.size() && c.positive[i];
    std::uniform_real_distribution<double> dist(pos ? 0.5 : -1.0, pos ? 1.5 : 1.0);
    std::vector<double> v(size_t(shape_numel(c.inputs[i])));
    for (double& x : v) x = double(float(dist(gen)));  // representable in f32 exactly
    ins.push_back(v);
  }
  return ins;
}

// Runs c on ctx in `dtype`: inputs and output placed by `v` (packed-only inputs contiguous), the
// output's view starting from `prior` with gaps `gap`; returns the placed output.
inline Placed run_case(Context& ctx, const Case& c, const std::vector<std::vector<double>>& ins,
                       DType dtype, Variant v, double alpha, double beta,
                       const std::vector<double>& prior, double gap) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Placed> placed;
  std::vector<TensorDesc> descs;
  for (size_t i = 0; i < ins.size(); ++i) {
    const bool packed = i < c.packed.size() && c.packed[i];
    Variant vi = packed ? Variant::contiguous : v;
    if (v == Variant::mixed) vi = i == 0 ? Variant::channels_last : Variant::contiguous;
    placed.push_back(place(ctx, ins[i], c.inputs[i], vi, dtype, nan));
    descs.push_back(placed.back().desc);
  }
  Placed out =
      place(ctx, prior, c.output, v == Variant::mixed ? Variant::subregion : v, dtype, gap);
  c.run(ctx, alpha, descs, beta, out.desc);
  ctx.synchronize();
  return out;
}

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i]));
    if (!ok && shown++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i]
                    << " (tol " << tol << ")";
  }
}

// The whole check of one case on ctx (f32), against the f64 reference on the CPU.
inline void check_case(Context& ctx, const Case& c) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double sentinel = 7.25;
  const auto ins = case_inputs(c);
  const size_t n = size_t(shape_numel(c.output));
  const std::vector<double> nans(n, nan);
  Context cpu;
  const std::vector<double> ref =
      read(run_case(cpu, c, ins, DType::f64, Variant::contiguous, 1.0, 0.0, nans, sentinel));
  for (double r : ref) ASSERT_TRUE(std::isfinite(r)) << c.name << ": the reference is not finite";
  const std::vector<double> base =
      read(run_case(ctx, c, ins, DType::f32, Variant::contiguous, 1.0, 0.0, nans, sentinel));
  expect_close(base, ref, c.tolerance, c.name + " f32 against f64");

  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const struct { double alpha, beta; } blends[] = {{1.0, 0.0}, {1.0, 1.0}, {0.5, 0.25}};
  for (Variant v : {Variant::contiguous, Variant::arbitrary}) {
    for (const auto& b : blends) {
      std::vector<double> prior(n, nan);
      if (b.beta != 0.0) {
        for (double& p : prior) p = double(float(dist(gen)));
      }
      const Placed out = run_case(ctx, c, ins, DType::f32, v, b.alpha, b.beta, prior, sentinel);
      std::vector<double> want(n);
      for (size_t i = 0; i < n; ++i) {
        want[i] = b.alpha * ref[i] + (b.beta != 0.0 ? b.beta * prior[i] : 0.0);
      }
      const std::string what = c.name + " " + variant_name(v) + " alpha " +
                               std::to_string(b.alpha) + " beta " + std::to_string(b.beta);
      expect_close(read(out), want, c.tolerance, what);
      EXPECT_TRUE(gaps_kept(out, sentinel)) << what << ": wrote outside the output's view";
    }
  }
  for (Variant v : {Variant::transposed, Variant::subregion, Variant::arbitrary,
                    Variant::channels_last, Variant::mixed}) {
    const Placed out = run_case(ctx, c, ins, DType::f32, v, 1.0, 0.0, nans, sentinel);
    const std::vector<double> got = read(out);
    const std::string what = c.name + " " + variant_name(v);
    const bool nhwc = v == Variant::channels_last || v == Variant::mixed;
    if (!c.strided_exact || (c.nhwc_path && nhwc)) {
      expect_close(got, base, c.tolerance, what + " against packed");
      EXPECT_TRUE(gaps_kept(out, sentinel)) << what << ": wrote outside the output's view";
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      // Bit for bit: the same kernel on the same values (NaN == NaN counts as equal).
      const bool same = got[i] == base[i] || (std::isnan(got[i]) && std::isnan(base[i]));
      if (!same) {
        ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", contiguous gave "
                      << base[i];
        break;
      }
    }
    EXPECT_TRUE(gaps_kept(out, sentinel)) << what << ": wrote outside the output's view";
  }
}

}  // namespace crema::kernels::api::testing
