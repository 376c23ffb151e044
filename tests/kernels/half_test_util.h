// Helpers of the bf16 and f16 kernel tests: f32 test data narrowed to a storage dtype, device
// tensors of any dtype (poisoned with NaN), and the check of an output that was rounded once.
//
// The tolerance of a bf16 / f16 result: the op computes in float from exactly representable
// inputs and rounds its output once, so against the exact (f64) result on the same inputs it is
// off by at most u |ref| (u = 2^-8 for bf16, 2^-11 for f16: one rounding), plus what its float
// arithmetic adds (a few 2^-24 relative per operation), which each test states.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/cast/cast.h"

namespace crema::kernels::testing {

// The relative error of one round-to-nearest into `dtype` (half an ulp: 2^-p for p significant
// bits): 2^-8 for bf16, 2^-11 for f16, 2^-24 for f32.
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return std::ldexp(1.0, -8);
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::f32:
      return std::ldexp(1.0, -24);
    case DType::f64:
      return std::ldexp(1.0, -53);
  }
  return 0;
}

// Half the smallest subnormal: the absolute error of rounding a value below the normal range.
inline double subnormal_error(DType dtype) {
  return dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;
}

// The host tensor `t` (any dtype) converted to `dtype` on the host.
inline Tensor host_as(const Tensor& t, DType dtype) {
  Context cpu;
  return cast_to(cpu, t, dtype);
}

// A device copy of the host tensor `host`, in its dtype.
inline Tensor device_copy(Context& ctx, const Tensor& host) {
  Tensor t = ctx.empty(host.shape(), host.dtype());
  t.copy_from(host);
  return t;
}

// A device tensor of `dtype` full of NaN: a kernel that leaves an element unwritten leaves a NaN.
inline Tensor poisoned_as(Context& ctx, const Shape& shape, DType dtype) {
  Tensor host(shape, dtype);
  host.fill(std::nanf(""));
  return device_copy(ctx, host);
}

// The elements of `t` (any dtype, any device) widened to double, once ctx's stream is done.
inline std::vector<double> widened(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  const std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

// A test input in a storage dtype: random f32 values in [low, high) rounded to `dtype` on the host,
// their exact values (the reference's input), and a device copy.
struct HalfInput {
  Tensor host;                // `dtype`
  std::vector<double> exact;  // host's values, widened
  Tensor device;              // `dtype` on ctx's device
};

inline HalfInput half_input(Context& ctx, Random& rng, const Shape& shape, DType dtype,
                            double low = -1.0, double high = 1.0) {
  Tensor values({shape_numel(shape)}, DType::f32);
  for (int64_t i = 0; i < values.numel(); ++i) {
    values.data<float>()[i] = float(rng.uniform(low, high));
  }
  HalfInput in;
  in.host = host_as(values.view(shape), dtype);
  const std::vector<float> wide = in.host.to_vector();
  in.exact.assign(wide.begin(), wide.end());
  in.device = device_copy(ctx, in.host);
  return in;
}

// Every element of `out` (a `dtype` result) within one rounding of the exact `ref`, plus what
// the op's own float arithmetic adds: |out - ref| <= (u(dtype) + extra) |ref| + slack + f16's
// subnormal half-step (slack: an absolute error the op's float arithmetic makes where its result
// cancels to near zero). NaN in out fails.
inline ::testing::AssertionResult within_one_rounding(const std::vector<double>& out,
                                                      const std::vector<double>& ref, DType dtype,
                                                      double extra = 0.0, double slack = 0.0) {
  if (out.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < out.size(); ++i) {
    const double bound =
        (unit_roundoff(dtype) + extra) * std::fabs(ref[i]) + slack + subnormal_error(dtype);
    if (!(std::fabs(out[i] - ref[i]) <= bound)) {
      if (bad++ == 0) first << "element " << i << ": " << out[i] << " vs " << ref[i];
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << out.size() << " elements beyond "
                                       << dtype_name(dtype) << "'s rounding; first " << first.str();
}

}  // namespace crema::kernels::testing
