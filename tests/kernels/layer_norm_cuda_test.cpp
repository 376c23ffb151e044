// LayerNorm kernels on CUDA against ref<double>, on awkward shapes: rows (the last axis: C = 1,
// 3, 13, below, at and above a warp, 96 and 768 as ConvNeXt, rows of whole 16-byte vectors that
// take the vectorized kernels and rows that do not) and columns (the channels of NCHW: N = 1, odd
// H and W, C not a multiple of 8), float32 and bf16 / f16, nchw and nhwc, with and without weight
// and bias, the parameter gradients accumulated, dx aliasing dy, misaligned pointers (the general
// kernels), poisoned outputs, repeat runs bit for bit.
//
// Tolerances. float32: y, mean, rstd within 2e-6 and dx within 1e-5 relative (norm-wise) of the
// reference, the parameter sums within 2e-6. bf16 / f16 (inputs exactly representable, the
// arithmetic float, one rounding at the store, half_test_util.h): each y and dx element within
// u |ref| + 1e-4 (u = 2^-8 bf16, 2^-11 f16; 1e-4 absolute for the float sums over C of values of
// order 1 where y or dx cancels to near 0); mean and rstd (float32) within 2e-6 relative; dweight
// and dbias (float32 sums of float products) within 1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layout/layout.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

struct Case {
  Shape shape;
  int axis;
  Layout layout = Layout::nchw;
};

// The reference on the exact inputs, in nchw order: y, mean, rstd, dx, and the parameter sums
// added to 1 (the gradients start at 1: the kernels accumulate).
struct Reference {
  std::vector<double> y, mean, rstd, dx, dweight, dbias;
};

Reference reference(const Case& c, const std::vector<double>& x, const std::vector<double>& dy,
                    const std::vector<double>* w, const std::vector<double>* b, float eps) {
  const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
  const int64_t outer = shape_count(c.shape, 0, c.axis);
  const int64_t inner = shape_count(c.shape, c.axis + 1, int(c.shape.size()));
  Reference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.mean.resize(size_t(positions));
  r.rstd.resize(size_t(positions));
  std::vector<double> h(x.size());
  ref::layer_norm_forward(outer, C, inner, x.data(), w ? w->data() : nullptr,
                          b ? b->data() : nullptr, eps, r.y.data(), r.mean.data(), r.rstd.data());
  ref::layer_norm_backward(outer, C, inner, x.data(), dy.data(), w ? w->data() : nullptr,
                           r.mean.data(), r.rstd.data(), r.dx.data(), h.data());
  r.dweight.assign(size_t(C), 1.0);
  r.dbias.assign(size_t(C), 1.0);
  for (size_t e = 0; e < x.size(); ++e) {
    const size_t ch = size_t((int64_t(e) / inner) % C);
    r.dweight[ch] += dy[e] * h[e];
    r.dbias[ch] += dy[e];
  }
  return r;
}

// The statistics are per position in memory order: for nhwc the reference's nchw positions
// (n, h, w) are stored as they are only for axis 1, the one nhwc case the tests run.
struct Outputs {
  std::vector<double> y, dx, mean, rstd, dweight, dbias;
};

// Runs forward and backward through the Tensor-level functions on device copies of x and dy
// stored as c.layout in `dtype`; outputs back in nchw order, widened.
Outputs run(Context& ctx, const Case& c, DType dtype, const Tensor& x_host, const Tensor& dy_host,
            const Tensor* w, const Tensor* b, float eps, bool dx_over_dy) {
  const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
  auto stored = [&](const Tensor& host) {
    const Tensor nchw = testing::device_copy(ctx, testing::host_as(host, dtype));
    if (c.layout == Layout::nchw) return nchw;
    Tensor t = ctx.empty(c.shape, dtype);
    t.set_layout(c.layout);
    convert(ctx, nchw, t);
    return t;
  };
  auto poisoned = [&](const Shape& shape, DType d) {
    Tensor t = testing::poisoned_as(ctx, shape, d);
    if (shape.size() == 4) t.set_layout(c.layout);
    return t;
  };
  auto in_nchw = [&](const Tensor& t) {
    if (c.layout == Layout::nchw) return testing::widened(ctx, t);
    Tensor back = ctx.empty(c.shape, dtype);
    convert(ctx, t, back);
    return testing::widened(ctx, back);
  };
  const Tensor x = stored(x_host), dy = stored(dy_host);
  Tensor y = poisoned(c.shape, dtype), m = poisoned({positions}, DType::f32),
         r = poisoned({positions}, DType::f32);
  Tensor dw = testing::to_device(ctx, {C}, std::vector<float>(size_t(C), 1.0f));
  Tensor db = testing::to_device(ctx, {C}, std::vector<float>(size_t(C), 1.0f));
  layer_norm_forward(ctx, x, w, b, c.axis, eps, y, m, r);
  Tensor dx = dx_over_dy ? dy : poisoned(c.shape, dtype);
  layer_norm_backward(ctx, x, dy, w, m, r, c.axis, &dx, &dw, &db);
  return {in_nchw(y),
          in_nchw(dx),
          testing::widened(ctx, m),
          testing::widened(ctx, r),
          testing::widened(ctx, dw),
          testing::widened(ctx, db)};
}

double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / (norm > 0 ? norm : 1.0));
}

void expect_same_bits(const Outputs& a, const Outputs& b) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dweight, b.dweight);
  EXPECT_EQ(a.dbias, b.dbias);
}

void check_case(Context& ctx, const Case& c, DType dtype, bool affine, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(c.shape) + " axis " +
               std::to_string(c.axis) + " " + layout_name(c.layout) + (affine ? "" : " no affine"));
  const int64_t C = c.shape[size_t(c.axis)];
  const float eps = 1e-6f;
  Random rng(seed);
  // x and dy rounded to dtype on the host: the reference reads the values the kernel reads.
  const Tensor x = testing::host_as(testing::random_tensor(rng, c.shape, -2, 3), dtype);
  const Tensor dy = testing::host_as(testing::random_tensor(rng, c.shape), dtype);
  const Tensor w = testing::random_tensor(rng, {C}, 0.5, 1.5), b = testing::random_tensor(rng, {C});
  const std::vector<double> wd = testing::to_double(w), bd = testing::to_double(b);
  const std::vector<float> xv = x.to_vector(), dyv = dy.to_vector();
  const Reference want = reference(c, {xv.begin(), xv.end()}, {dyv.begin(), dyv.end()},
                                   affine ? &wd : nullptr, affine ? &bd : nullptr, eps);
  const Tensor wg = testing::to_device(ctx, w), bg = testing::to_device(ctx, b);
  const Tensor* wp = affine ? &wg : nullptr;
  const Tensor* bp = affine ? &bg : nullptr;
  const Outputs got = run(ctx, c, dtype, x, dy, wp, bp, eps, false);
  if (c.layout == Layout::nchw || c.axis == 1) {  // statistics in the reference's order
    EXPECT_LT(rel_error(got.mean, want.mean), 2e-6);
    EXPECT_LT(rel_error(got.rstd, want.rstd), 2e-6);
  }
  if (dtype == DType::f32) {
    EXPECT_LT(rel_error(got.y, want.y), 2e-6);
    EXPECT_LT(rel_error(got.dx, want.dx), 1e-5);
    EXPECT_LT(rel_error(got.dweight, want.dweight), 2e-6);
    EXPECT_LT(rel_error(got.dbias, want.dbias), 2e-6);
  } else {
    EXPECT_TRUE(testing::within_one_rounding(got.y, want.y, dtype, 0.0, 1e-4));
    EXPECT_TRUE(testing::within_one_rounding(got.dx, want.dx, dtype, 0.0, 1e-4));
    EXPECT_LT(rel_error(got.dweight, want.dweight), 1e-5);
    EXPECT_LT(rel_error(got.dbias, want.dbias), 1e-5);
  }
  // Again, and with dx written over dy: the same bits.
  expect_same_bits(run(ctx, c, dtype, x, dy, wp, bp, eps, false), got);
  expect_same_bits(run(ctx, c, dtype, x, dy, wp, bp, eps, true), got);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {{{1, 1}, 1},
                                        {{5, 7}, 1},
                                        {{3, 32}, 1},
                                        {{7, 33}, 1},
                                        {{4, 3}, 1},
                                        {{9, 13}, 1},
                                        {{2, 3, 768}, 2},
                                        {{1, 13, 7, 7}, 1},
                                        {{3, 5, 17, 19}, 1},
                                        {{2, 96, 1, 1}, 1},
                                        {{4, 7, 33}, 1},
                                        {{2, 3, 5, 11}, 3},
                                        {{1, 1, 9, 9}, 1},
                                        {{8, 96, 56, 56}, 1},
                                        {{8, 56, 56, 96}, 3},
                                        {{3, 5, 7, 96}, 3},
                                        {{1, 3, 3, 192}, 3},
                                        {{2, 7, 5, 384}, 3},
                                        {{1, 5, 3, 1024}, 3},
                                        {{2, 3, 1032}, 2},
                                        {{1, 40, 7}, 2},
                                        {{1, 96, 5, 7}, 1, Layout::nhwc},
                                        {{2, 13, 3, 5}, 1, Layout::nhwc},
                                        {{1, 768, 3, 3}, 1, Layout::nhwc},
                                        {{1, 3, 9, 7}, 1, Layout::nhwc}};
  return all;
}

TEST(LayerNormCuda, MatchesReferenceOnAwkwardShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 20;
  for (const Case& c : cases()) {
    for (bool affine : {true, false}) check_case(ctx, c, DType::f32, affine, ++seed);
  }
}

TEST(LayerNormCuda, HalvesMatchReferenceOnAwkwardShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  uint64_t seed = 200;
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (const Case& c : cases()) {
      for (bool affine : {true, false}) check_case(ctx, c, dtype, affine, ++seed);
    }
  }
}

// Rows one element past a 16-byte boundary take the general kernels: the same values as the
// reference, nothing written outside the rows, the parameter sums as with aligned rows.
TEST(LayerNormCuda, MisalignedRowsFallBack) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t rows = 37, C = 96, n = rows * C;
  Random rng(5);
  const Tensor x = testing::random_tensor(rng, {n + 1}, -2, 3),
               dy = testing::random_tensor(rng, {n + 1});
  const Tensor w = testing::random_tensor(rng, {C}, 0.5, 1.5), b = testing::random_tensor(rng, {C});
  const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
  const std::vector<double> wd = testing::to_double(w), bd = testing::to_double(b);
  const Case c{{rows, C}, 1};
  const Reference want =
      reference(c, {xd.begin() + 1, xd.end()}, {dyd.begin() + 1, dyd.end()}, &wd, &bd, 1e-5f);
  const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
  const Tensor wg = testing::to_device(ctx, w), bg = testing::to_device(ctx, b);
  Tensor y = testing::poisoned_device(ctx, {n + 1}), dx = testing::poisoned_device(ctx, {n + 1});
  Tensor m = testing::poisoned_device(ctx, {rows}), r = testing::poisoned_device(ctx, {rows});
  Tensor dw = testing::to_device(ctx, {C}, std::vector<float>(size_t(C), 1.0f)), db = dw.clone();
  Tensor workspace = ctx.empty(
      {int64_t(cuda::layer_norm_backward_workspace_bytes<float>(rows, C, 1) / sizeof(float))});
  cuda::layer_norm_forward(rows, C, 1, xg.data<float>() + 1, wg.data<float>(), bg.data<float>(),
                           1e-5f, y.data<float>() + 1, m.data<float>(), r.data<float>(),
                           ctx.stream());
  cuda::layer_norm_backward(rows, C, 1, xg.data<float>() + 1, dyg.data<float>() + 1,
                            wg.data<float>(), m.data<float>(), r.data<float>(),
                            dx.data<float>() + 1, dw.data<float>(), db.data<float>(),
                            workspace.raw(), ctx.stream());
  std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
  EXPECT_TRUE(std::isnan(yv[0]));
  EXPECT_TRUE(std::isnan(dxv[0]));
  yv.erase(yv.begin());
  dxv.erase(dxv.begin());
  EXPECT_LT(testing::rel_error(yv, want.y), 2e-6);
  EXPECT_LT(testing::rel_error(dxv, want.dx), 1e-5);
  EXPECT_LT(testing::rel_error(host_values(ctx, dw), want.dweight), 2e-6);
  EXPECT_LT(testing::rel_error(host_values(ctx, db), want.dbias), 2e-6);
}

// The parameter sums alone (no dx) and dx alone are what the full backward gives.
TEST(LayerNormCuda, PartialBackwards) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const Shape& shape : std::vector<Shape>{{64, 96}, {7, 13}, {2, 5, 3, 4}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(shape));
      const int axis = 1;  // rows of 96 (vectorized) and of 13, columns of [2, 5, 3, 4]
      const int64_t C = shape[size_t(axis)], positions = shape_numel(shape) / C;
      Random rng(9);
      const Tensor x = testing::device_copy(
          ctx, testing::host_as(testing::random_tensor(rng, shape, -2, 3), dtype));
      const Tensor dy =
          testing::device_copy(ctx, testing::host_as(testing::random_tensor(rng, shape), dtype));
      Tensor y = ctx.empty(shape, dtype), m = ctx.empty({positions}), r = ctx.empty({positions});
      layer_norm_forward(ctx, x, nullptr, nullptr, axis, 1e-5f, y, m, r);
      const std::vector<float> zeros(size_t(C), 0.0f);
      Tensor dx = ctx.empty(shape, dtype), dx_alone = ctx.empty(shape, dtype);
      Tensor dw = testing::to_device(ctx, {C}, zeros), db = dw.clone();
      Tensor dw_alone = dw.clone(), db_alone = dw.clone();
      layer_norm_backward(ctx, x, dy, nullptr, m, r, axis, &dx, &dw, &db);
      layer_norm_backward(ctx, x, dy, nullptr, m, r, axis, &dx_alone, nullptr, nullptr);
      layer_norm_backward(ctx, x, dy, nullptr, m, r, axis, nullptr, &dw_alone, &db_alone);
      EXPECT_EQ(testing::widened(ctx, dx_alone), testing::widened(ctx, dx));
      EXPECT_EQ(testing::widened(ctx, dw_alone), testing::widened(ctx, dw));
      EXPECT_EQ(testing::widened(ctx, db_alone), testing::widened(ctx, db));
    }
  }
}

}  // namespace
}  // namespace crema::kernels
