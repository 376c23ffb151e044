// cuda::pool2d_* in nhwc: PoolVersion::channel_vectors against per_element, bit for bit (y, argmax,
// dx), in f32, bf16 and f16. C = 3, 8, 12, 64 take 16-byte vectors where C allows (C % 4 in f32,
// C % 8 in bf16 and f16) and the per-element fallback elsewhere; a view one element past a 16-byte
// boundary takes the fallback too. Inputs of five values and NaNs make ties and NaN windows, where
// a wrong order of comparisons picks another argmax. Odd sizes, N = 1, overlapping and clipped
// windows, global pooling. Outputs are poisoned (NaN) first, and must hold no NaN where the
// inputs hold none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/pooling/pooling.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/pooling_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using cuda::PoolVersion;

// A device tensor of n + offset elements of `dtype`: ties (values -2 .. 2) and, where `nans`, a
// NaN every 37 elements.
Tensor tied_values(Context& ctx, Random& rng, int64_t n, DType dtype, bool nans) {
  Tensor values({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    values.data<float>()[i] =
        nans && i % 37 == 5 ? std::nanf("") : std::floor(float(rng.uniform(-2, 3)));
  }
  return testing::device_copy(ctx, testing::host_as(values, dtype));
}

Tensor host_of(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), t.dtype());
  host.copy_from(t);
  return host;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Whether the host tensor holds a NaN at or after element `from`.
bool any_nan(const Tensor& host, int64_t from) {
  const std::vector<float> v = host.to_vector();
  for (size_t i = size_t(from); i < v.size(); ++i) {
    if (std::isnan(v[i])) return true;
  }
  return false;
}

struct Outputs {
  Tensor y, argmax, dx;  // on the host
};

// Forward then backward with `version`; every pointer `offset` elements into its buffer.
template <class T>
Outputs run(Context& ctx, const Pool2dGeometry& g, PoolMode mode, DType dtype, const Tensor& x,
            const Tensor& dy, int64_t offset, PoolVersion version) {
  const int64_t ys = g.N * g.C * g.P * g.Q, xs = g.N * g.C * g.H * g.W;
  Tensor y = testing::poisoned_as(ctx, {ys + offset}, dtype);
  Tensor argmax = testing::poisoned_as(ctx, {ys + offset}, DType::f32);
  Tensor dx = testing::poisoned_as(ctx, {xs + offset}, dtype);
  float* a = mode == PoolMode::max ? argmax.data<float>() + offset : nullptr;
  cuda::pool2d_forward<T>(g, mode, x.data<T>() + offset, y.data<T>() + offset, a, Layout::nhwc,
                          version, ctx.stream());
  cuda::pool2d_backward<T>(g, mode, dy.data<T>() + offset, a, dx.data<T>() + offset, Layout::nhwc,
                           version, ctx.stream());
  return {host_of(ctx, y), host_of(ctx, argmax), host_of(ctx, dx)};
}

template <class T>
void expect_versions_agree(Context& ctx, const Pool2dGeometry& g, DType dtype) {
  for (PoolMode mode : {PoolMode::max, PoolMode::average}) {
    for (int64_t offset : {0, 1}) {
      for (bool nans : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + testing::describe(g) +
                     (mode == PoolMode::max ? " max" : " average") +
                     " offset=" + std::to_string(offset) + (nans ? " with NaNs" : ""));
        Random rng(uint64_t(g.C * 100 + g.H + offset));
        const Tensor x = tied_values(ctx, rng, g.N * g.C * g.H * g.W + offset, dtype, nans);
        const Tensor dy = tied_values(ctx, rng, g.N * g.C * g.P * g.Q + offset, dtype, false);
        const Outputs want = run<T>(ctx, g, mode, dtype, x, dy, offset, PoolVersion::per_element);
        const Outputs got =
            run<T>(ctx, g, mode, dtype, x, dy, offset, PoolVersion::channel_vectors);
        EXPECT_TRUE(same_bytes(got.y, want.y));
        EXPECT_TRUE(same_bytes(got.dx, want.dx));
        if (mode == PoolMode::max) {
          EXPECT_TRUE(same_bytes(got.argmax, want.argmax));
        }
        if (!nans) {  // every element written (the poison's NaN gone past the offset)
          EXPECT_FALSE(any_nan(got.y, offset));
          EXPECT_FALSE(any_nan(got.dx, offset));
        }
      }
    }
  }
}

TEST(PoolingVersionsCuda, ChannelVectorsGiveThePerElementBits) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int64_t C : {3, 8, 12, 64}) {
    for (const Pool2dGeometry& g : {
             testing::geometry(1, C, 13, 11, 3, 2, 1, false),  // ResNet's max pool, odd sizes
             testing::geometry(2, C, 9, 9, 3, 1, 1, false),    // stride 1: nine windows each
             testing::geometry(3, C, 11, 13, 2, 3, 1, true),   // gaps, ceil mode
             testing::geometry(2, C, 7, 7, 7, 1, 0, false),    // global
         }) {
      expect_versions_agree<float>(ctx, g, DType::f32);
      expect_versions_agree<bf16_t>(ctx, g, DType::bf16);
      expect_versions_agree<f16_t>(ctx, g, DType::f16);
    }
  }
}

}  // namespace
}  // namespace crema::kernels
