// kernels::convert on CUDA against the CPU, bit for bit: every pair of f32, bf16, f16, both
// layouts each way, on shapes whose C and H*W are not multiples of the 32 x 32 tiles (and N = 1,
// H*W = 1), with few rows (C = 3 and 8 from nchw, H*W = 4 from nhwc: the thin path) and one more
// (C = 12: the tiles), values of every kind (random bit patterns: NaNs, infinities, subnormals),
// outputs poisoned first; and the accumulating form into f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/float16.h"
#include "core/random.h"
#include "kernels/cast/cast.h"
#include "kernels/layout/layout.h"
#include "tests/kernels/half_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

const DType kGpuTypes[] = {DType::f32, DType::bf16, DType::f16};

Tensor awkward(const Shape& shape, uint64_t seed) {
  Random rng(seed);
  Tensor t(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] =
        (i % 2 == 0) ? f32_from_bits(uint32_t(rng.next())) : float(rng.uniform(-2.0, 2.0));
  }
  return t;
}

Tensor on_host(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), t.dtype());
  host.set_layout(t.layout());
  host.copy_from(t);
  return host;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// f32 tensors equal bit for bit, except that any NaN equals any NaN (a sum's NaN payload is the
// processor's choice: x86 keeps an operand's, the GPU gives the canonical one).
bool same_sums(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float u = a.data<float>()[i], v = b.data<float>()[i];
    if (!(std::isnan(u) && std::isnan(v)) && f32_bits(u) != f32_bits(v)) return false;
  }
  return true;
}

TEST(ConvertCuda, EveryPairAndLayoutMatchesTheCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  for (const Shape& shape :
       {Shape{2, 37, 3, 5}, Shape{1, 64, 7, 7}, Shape{3, 8, 1, 1}, Shape{2, 3, 33, 31},
        Shape{1, 8, 5, 7}, Shape{3, 12, 9, 11}, Shape{2, 17, 2, 2}, Shape{1001}}) {
    const Tensor values = awkward(shape, uint64_t(shape_numel(shape)));
    for (DType from : kGpuTypes) {
      for (Layout from_layout : {Layout::nchw, Layout::nhwc}) {
        Tensor x = cast_to(cpu, values, from);
        x.set_layout(from_layout);
        Tensor xg = testing::device_copy(ctx, x);
        xg.set_layout(from_layout);
        for (DType to : kGpuTypes) {
          for (Layout to_layout : {Layout::nchw, Layout::nhwc}) {
            SCOPED_TRACE(x.description() + " -> " + dtype_name(to) + " " + layout_name(to_layout));
            Tensor want(shape, to);
            want.set_layout(to_layout);
            convert(cpu, x, want);
            Tensor y = testing::poisoned_as(ctx, shape, to);
            y.set_layout(to_layout);
            convert(ctx, xg, y);
            EXPECT_TRUE(same_bytes(on_host(ctx, y), want));
            if (to != DType::f32) continue;
            // accumulate: y (now x converted) += x converted again: 2x, rounded in f32.
            convert(cpu, x, want, /*accumulate=*/true);
            convert(ctx, xg, y, /*accumulate=*/true);
            EXPECT_TRUE(same_sums(on_host(ctx, y), want));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
