// The convolution's passes with y or dy a window of a wider tensor (kernels/convolution/
// convolution.h, ImageWindow; core/VIEWS.md): against the f64 reference (f32 tolerance as the
// plain CPU path's tests), bit for bit against the plain CPU path, and nothing outside the
// window touched.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/convolution/convolution.h"
#include "tests/support/layer_harness.h"

namespace crema::kernels {
namespace {

// Awkward shapes: odd sizes, padding, stride, groups, a pointwise one (chunks of one image and
// of several); the window sits between `before` and `after` channels of a wider tensor.
struct Case {
  Conv2dGeometry g;
  int64_t before, after;
};
std::vector<Case> cases() {
  return {{{3, 4, 7, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 2, 3},
          {{5, 6, 9, 5, 4, 3, 2, 0, 1, 2, 1, 1, 1, 2}, 0, 1},
          {{2, 3, 16, 17, 3, 1, 1}, 3, 0},
          {{4, 2, 11, 13, 2, 5, 5, 2, 2, 1, 1, 1, 1, 1}, 1, 1}};
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  return Tensor::from_vector(shape,
                             testing::random_values(size_t(shape_numel(shape)), -1, 1, seed));
}

Tensor to_f64(const Tensor& t) {
  Tensor d(t.shape(), DType::f64);
  const auto v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i) d.data<double>()[i] = v[i];
  return d;
}

constexpr float kSentinel = 12345.0f;
constexpr double kTolerance = 1e-4;  // f32 sums against f64: relative to the magnitude

// The window's images of `wide` [N, before + K + after, P, Q] as a dense [N, K, P, Q] vector;
// everything else must still be the sentinel.
std::vector<float> window_of(const Tensor& wide, const Case& c, bool* untouched) {
  const int64_t PQ = c.g.P() * c.g.Q(), total = c.before + c.g.K + c.after;
  const auto v = wide.to_vector();
  std::vector<float> inside;
  *untouched = true;
  for (int64_t n = 0; n < c.g.N; ++n) {
    for (int64_t ch = 0; ch < total; ++ch) {
      for (int64_t i = 0; i < PQ; ++i) {
        const float x = v[size_t((n * total + ch) * PQ + i)];
        if (ch >= c.before && ch < c.before + c.g.K) {
          inside.push_back(x);
        } else if (x != kSentinel) {
          *untouched = false;
        }
      }
    }
  }
  return inside;
}

Tensor wide_tensor(const Case& c) {
  Tensor wide({c.g.N, c.before + c.g.K + c.after, c.g.P(), c.g.Q()});
  wide.fill(kSentinel);
  return wide;
}

ImageWindow window_in(Tensor& wide, const Case& c) {
  const int64_t PQ = c.g.P() * c.g.Q();
  return {&wide, c.before * PQ, (c.before + c.g.K + c.after) * PQ};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), kTolerance * (1 + std::abs(want[i]))) << i;
  }
}

TEST(ConvolutionWindow, ForwardWritesTheWindowOnly) {
  Context ctx;
  for (const Case& c : cases()) {
    const Conv2dGeometry& g = c.g;
    const Tensor x = random_tensor(g.x_shape(), 1), w = random_tensor(g.w_shape(), 2);
    const Tensor bias = random_tensor({g.K}, 3);
    Tensor wide = wide_tensor(c);
    conv2d_forward_window(ctx, g, x, w, &bias, window_in(wide, c));
    Tensor plain(g.y_shape());
    conv2d_forward(ctx, g, x, w, &bias, plain);
    Tensor ref(g.y_shape(), DType::f64);
    const Tensor x64 = to_f64(x), w64 = to_f64(w), b64 = to_f64(bias);
    ref::conv2d_forward(g, x64.data<double>(), w64.data<double>(), b64.data<double>(),
                        ref.data<double>());
    bool untouched = false;
    const std::vector<float> got = window_of(wide, c, &untouched);
    EXPECT_TRUE(untouched);
    EXPECT_EQ(got, plain.to_vector());  // the same sums
    expect_close(got, ref.to_vector());
  }
}

TEST(ConvolutionWindow, BackwardReadsDyFromTheWindow) {
  Context ctx;
  for (const Case& c : cases()) {
    const Conv2dGeometry& g = c.g;
    const Tensor x = random_tensor(g.x_shape(), 4), w = random_tensor(g.w_shape(), 5);
    const Tensor dy = random_tensor(g.y_shape(), 6);
    // dy inside a wide gradient whose other channels are sentinels (which must not leak in).
    Tensor wide = wide_tensor(c);
    const int64_t PQ = g.P() * g.Q(), total = c.before + g.K + c.after;
    for (int64_t n = 0; n < g.N; ++n) {
      std::copy(dy.data<float>() + n * g.K * PQ, dy.data<float>() + (n + 1) * g.K * PQ,
                wide.data<float>() + (n * total + c.before) * PQ);
    }
    Tensor dx(g.x_shape()), dw(g.w_shape()), db({g.K});
    dw.fill(0.5f), db.fill(0.25f);  // accumulated
    conv2d_backward_data_window(ctx, g, window_in(wide, c), w, dx);
    conv2d_backward_weights_window(ctx, g, x, window_in(wide, c), &dw, &db);
    Tensor pdx(g.x_shape()), pdw(g.w_shape()), pdb({g.K});
    pdw.fill(0.5f), pdb.fill(0.25f);
    conv2d_backward_data(ctx, g, dy, w, pdx);
    conv2d_backward_weights(ctx, g, x, dy, pdw, &pdb);
    EXPECT_EQ(dx.to_vector(), pdx.to_vector());
    EXPECT_EQ(dw.to_vector(), pdw.to_vector());
    EXPECT_EQ(db.to_vector(), pdb.to_vector());
    // The reference: dx written, dw and db summed onto 0.5 and 0.25.
    const Tensor x64 = to_f64(x), w64 = to_f64(w), dy64 = to_f64(dy);
    Tensor rdx(g.x_shape(), DType::f64), rdw(g.w_shape(), DType::f64), rdb({g.K}, DType::f64);
    rdw.fill(0.5f), rdb.fill(0.25f);
    ref::conv2d_backward_data(g, dy64.data<double>(), w64.data<double>(), rdx.data<double>());
    ref::conv2d_backward_filter(g, x64.data<double>(), dy64.data<double>(), rdw.data<double>());
    ref::conv2d_backward_bias(g, dy64.data<double>(), rdb.data<double>());
    expect_close(dx.to_vector(), rdx.to_vector());
    expect_close(dw.to_vector(), rdw.to_vector());
    expect_close(db.to_vector(), rdb.to_vector());
  }
}

TEST(ConvolutionWindow, AWindowOutsideItsParentIsAnError) {
  Context ctx;
  const Case c = cases()[0];
  const Tensor x = random_tensor(c.g.x_shape(), 1), w = random_tensor(c.g.w_shape(), 2);
  Tensor wide = wide_tensor(c);
  ImageWindow window = window_in(wide, c);
  window.offset += 1 + c.after * c.g.P() * c.g.Q();  // the last image runs past the end
  EXPECT_THROW(conv2d_forward_window(ctx, c.g, x, w, nullptr, window), Error);
  window = window_in(wide, c);
  window.image_stride = c.g.K;  // images overlapping
  EXPECT_THROW(conv2d_forward_window(ctx, c.g, x, w, nullptr, window), Error);
}

}  // namespace
}  // namespace crema::kernels
