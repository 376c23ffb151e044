// The primitive API (kernels/api/) on the CPU: every primitive against the f64 reference with
// the blends (beta = 0 on NaN, beta = 1, alpha = 0.5) and its strided inputs and outputs (a
// transposed view, a sub-region, arbitrary strides) equal to the contiguous result
// (api_test_util.h); descriptors refused with the op and the tensor named.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "kernels/api/primitives.h"
#include "kernels/tensor_ops/tensor_ops.h"
#include "tests/kernels/activation_test_util.h"
#include "tests/kernels/api_test_cases.h"
#include "tests/kernels/api_test_util.h"

namespace crema::kernels::api {
namespace {

using testing::api_cases;
using testing::Case;

class ApiCase : public ::testing::TestWithParam<size_t> {};

TEST_P(ApiCase, MatchesReferenceBlendsAndStrides) {
  const Case c = api_cases()[GetParam()];
  Context ctx(Device::cpu(), 1, 2);
  testing::check_case(ctx, c);
}

INSTANTIATE_TEST_SUITE_P(Primitives, ApiCase, ::testing::Range(size_t(0), api_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return api_cases()[info.param].name;
                         });

// Every pointwise kind is an activation mode of the API, with its case above. The compiler does
// not say so when one is missing (kind_of switches over the modes, not the kinds): this test does
// (kernels/activations/README.md, "Adding an activation", step 9).
TEST(ApiActivation, EveryPointwiseKindHasAMode) {
  std::set<std::string> names;
  for (const Case& c : api_cases()) names.insert(c.name);
  for (const Activation& a : activation_test::all_activations()) {
    const std::string name = std::string("activation_forward_") + activation_name(a.kind);
    EXPECT_EQ(names.count(name), 1u)
        << name << " missing: kernels/activations/README.md step 9 (ActivationMode)";
  }
}

// The message of what `f` throws (crema::Error), or "" when it throws nothing.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ApiDesc, ValidationNamesTheTensor) {
  Context ctx;
  std::vector<float> buf(4096, 0.0f);
  const TensorDesc x = TensorDesc::nchw(buf.data(), DType::f32, ctx.device(), 1, 3, 5, 5);
  const TensorDesc y = TensorDesc::nchw(buf.data() + 1000, DType::f32, ctx.device(), 1, 3, 5, 5);
  LrnParams p;
  p.local_size = 3;

  TensorDesc overlapping = y;
  overlapping.strides = {75, 0, 5, 1};
  std::string m = error_of([&] { lrn_forward(ctx, p, 1.0, x, 0.0, overlapping); });
  EXPECT_NE(m.find("lrn_forward: y: stride 0 of dim 1 (extent 3) overlaps"), std::string::npos)
      << m;

  TensorDesc half = y;
  half.dtype = DType::bf16;
  m = error_of([&] { lrn_forward(ctx, p, 1.0, x, 0.0, half); });
  EXPECT_NE(m.find("lrn_forward: y: dtype bf16 not supported by lrn_forward"), std::string::npos)
      << m;

  TensorDesc negative = x;
  negative.strides[3] = -1;
  m = error_of([&] { lrn_forward(ctx, p, 1.0, negative, 0.0, y); });
  EXPECT_NE(m.find("lrn_forward: x: stride -1 of dim 3 is negative"), std::string::npos) << m;

  TensorDesc elsewhere = y;
  elsewhere.device = Device::cuda(0);
  m = error_of([&] { lrn_forward(ctx, p, 1.0, x, 0.0, elsewhere); });
  EXPECT_NE(m.find("lrn_forward: y: on cuda:0, but the context runs on cpu"), std::string::npos)
      << m;

  TensorDesc wrong = y;
  wrong.dims = {1, 3, 5, 4};
  wrong.strides = contiguous_strides(wrong.dims);
  m = error_of([&] { lrn_forward(ctx, p, 1.0, x, 0.0, wrong); });
  EXPECT_NE(m.find("lrn_forward: y: dims [1, 3, 5, 4], expected [1, 3, 5, 5]"), std::string::npos)
      << m;

  TensorDesc nine =
      TensorDesc::contiguous(buf.data(), DType::f32, ctx.device(), {1, 1, 1, 1, 1, 1, 1, 1, 1});
  m = error_of([&] { transform_tensor(ctx, 1.0, nine, 0.0, nine); });
  EXPECT_NE(m.find("transform_tensor: x: 9 dims, expected 1 to 8"), std::string::npos) << m;

  TensorDesc mixed = y;
  mixed.dtype = DType::f64;
  m = error_of([&] { lrn_forward(ctx, p, 1.0, x, 0.0, mixed); });
  EXPECT_NE(m.find("lrn_forward: y: dtype f64, expected f32"), std::string::npos) << m;
}

TEST(ApiDesc, PackedOnlyParametersRefuseStrides) {
  Context ctx;
  std::vector<float> x(2 * 3 * 4, 0.5f), y(x.size()), g(6, 1.0f), b(3, 0.0f), sm(3), si(3);
  const TensorDesc xd = TensorDesc::contiguous(x.data(), DType::f32, ctx.device(), {2, 3, 4});
  const TensorDesc yd = TensorDesc::contiguous(y.data(), DType::f32, ctx.device(), {2, 3, 4});
  const TensorDesc gd = TensorDesc::strided(g.data(), DType::f32, ctx.device(), {3}, {2});
  const auto c = [&](std::vector<float>& v) {
    return TensorDesc::contiguous(v.data(), DType::f32, ctx.device(), {3});
  };
  const std::string m = error_of([&] {
    batch_norm_forward_training(ctx, BatchNormMode::spatial, 1.0, 0.0, xd, yd, gd, c(b), 0.1,
                                nullptr, nullptr, 1e-5, c(sm), c(si));
  });
  EXPECT_NE(m.find("batch_norm_forward_training: gamma: strides [2] not supported"),
            std::string::npos)
      << m;
}

TEST(ApiDesc, ViewsAndPackedness) {
  const Device cpu = Device::cpu();
  const TensorDesc a = TensorDesc::nchw(nullptr, DType::f32, cpu, 2, 3, 4, 5);
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_FALSE(a.is_nhwc_packed());
  const TensorDesc n = TensorDesc::nhwc(nullptr, DType::f32, cpu, 2, 3, 4, 5);
  EXPECT_TRUE(n.is_nhwc_packed());
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(n.strides, (std::vector<int64_t>{60, 1, 15, 3}));
  const TensorDesc t = a.transposed(2, 3);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 3, 5, 4}));
  EXPECT_EQ(t.strides, (std::vector<int64_t>{60, 20, 1, 5}));
  EXPECT_FALSE(t.is_contiguous());
}

// In place: y = relu(y) on a strided view reads every element before it is overwritten.
TEST(ApiInPlace, ActivationOnItsOwnStridedView) {
  Context ctx;
  std::vector<float> buf = {-1, 9, 2, 9, -3, 9, 4, 9};
  const TensorDesc v = TensorDesc::strided(buf.data(), DType::f32, ctx.device(), {4}, {2});
  ActivationDesc relu;
  activation_forward(ctx, relu, 1.0, v, 0.0, v);
  EXPECT_EQ(buf, (std::vector<float>{0, 9, 2, 9, 0, 9, 4, 9}));
}

TEST(ApiTensorOps, SetAndScaleStrided) {
  Context ctx;
  std::vector<float> buf(12, 7.0f);
  const TensorDesc v = TensorDesc::strided(buf.data() + 1, DType::f32, ctx.device(), {2, 2},
                                           {1, 6});  // a transposed view with gaps
  std::fill(buf.begin(), buf.end(), std::numeric_limits<float>::quiet_NaN());
  buf[0] = buf[3] = buf[5] = 7.0f;
  set_tensor(ctx, v, 2.5);
  EXPECT_EQ(buf[1], 2.5f);
  EXPECT_EQ(buf[2], 2.5f);
  EXPECT_EQ(buf[7], 2.5f);
  EXPECT_EQ(buf[8], 2.5f);
  EXPECT_EQ(buf[0], 7.0f);
  EXPECT_EQ(buf[3], 7.0f);
  scale_tensor(ctx, v, -2.0);
  EXPECT_EQ(buf[1], -5.0f);
  EXPECT_EQ(buf[8], -5.0f);
  EXPECT_EQ(buf[5], 7.0f);
}

// reduce_tensor's indices into a strided descriptor equal the Tensor-level call's.
TEST(ApiTensorOps, ReduceIndicesStrided) {
  Context ctx;
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7) % 11) - 5.0f;
  const Tensor xt = Tensor::from_vector({2, 3, 4}, x);
  Tensor want_y({2, 1, 4}), want_i({2, 1, 4});
  kernels::reduce_tensor(ctx, ReduceOp::max, 1.0, xt, 0.0, want_y, &want_i);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(8, nan), idx(16, nan);
  const TensorDesc xd = TensorDesc::contiguous(x.data(), DType::f32, ctx.device(), {2, 3, 4});
  const TensorDesc yd = TensorDesc::contiguous(y.data(), DType::f32, ctx.device(), {2, 1, 4});
  const TensorDesc id =
      TensorDesc::strided(idx.data(), DType::f32, ctx.device(), {2, 1, 4}, {8, 1, 2});
  reduce_tensor(ctx, ReduceOp::max, 1.0, xd, 0.0, yd, &id);
  const std::vector<float> wy = want_y.to_vector(), wi = want_i.to_vector();
  for (int n = 0; n < 2; ++n) {
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(y[size_t(n * 4 + w)], wy[size_t(n * 4 + w)]);
      EXPECT_EQ(idx[size_t(n * 8 + w * 2)], wi[size_t(n * 4 + w)]);
      EXPECT_TRUE(std::isnan(idx[size_t(n * 8 + w * 2 + 1)])) << "a gap was written";
    }
  }
}

// The plan under transform_strided: packed on both sides is one axis; a transposed y keeps two,
// ordered by y's strides.
TEST(TransformStrided, PlanMergesAndOrdersByY) {
  const StridedPlan packed = make_strided_plan({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  EXPECT_EQ(packed.x.ndim, 1);
  EXPECT_EQ(packed.y.shape[0], 24);
  const StridedPlan t = make_strided_plan({3, 4}, {4, 1}, {1, 3});
  ASSERT_EQ(t.y.ndim, 2);
  EXPECT_EQ(t.y.stride[0], 3);  // the outer walk follows y's larger stride (dim 1)
  EXPECT_EQ(t.x.stride[0], 1);
  EXPECT_EQ(t.y.stride[1], 1);
  EXPECT_EQ(t.x.stride[1], 4);
}

// cpu:: against ref:: on strided x and y with every blend (beta 0 on NaN).
TEST(TransformStrided, CpuMatchesReference) {
  const Shape shape = {3, 5, 4};
  const std::vector<int64_t> xs = {1, 3, 15}, ys = {40, 8, 2};  // x reversed, y with gaps
  std::vector<float> x(60), y0(120), y1, y2;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) - 6.0f;
  for (size_t i = 0; i < y0.size(); ++i) y0[i] = float(i % 7) * 0.5f;
  for (const auto& [alpha, beta] :
       std::vector<std::pair<float, float>>{{1, 0}, {1, 1}, {0.5f, 0.25f}}) {
    y1 = y2 = y0;
    if (beta == 0) {
      for (size_t i = 0; i < y1.size(); i += 2) y1[i] = y2[i] = std::nanf("");
    }
    cpu::transform_strided(make_strided_plan(shape, xs, ys), alpha, x.data(), beta, y1.data(), 2);
    ref::transform_strided<float>(3, shape.data(), xs.data(), ys.data(), alpha, x.data(), beta,
                                  y2.data());
    for (size_t i = 0; i < y1.size(); ++i) {
      EXPECT_TRUE(y1[i] == y2[i] || (std::isnan(y1[i]) && std::isnan(y2[i]))) << i;
    }
    EXPECT_FALSE(std::isnan(y1[0])) << "element (0, 0, 0) is in the view and must be written";
  }
}

}  // namespace
}  // namespace crema::kernels::api
