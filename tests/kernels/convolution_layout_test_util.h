// What the Tensor-level layout tests share on the CPU and on the GPU
// (convolution_layout_test.cpp, convolution_layout_cuda_test.cpp): awkward geometries, one
// problem's inputs and its double reference in NHWC (with the same sums over absolute values,
// for error bounds), and the element-wise check against a bound.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels::conv_test {

// N = 1, odd H and W, C not a multiple of 8, stride 2, dilation, groups, depthwise, 1x1.
inline const std::vector<Conv2dGeometry>& layout_geometries() {
  static const std::vector<Conv2dGeometry> all = {
      // N C  H  W  K  R  S  pad_h pad_w stride_h stride_w dilation_h dilation_w groups
      {1, 3, 7, 6, 5, 3, 2, 1, 0},
      {2, 6, 9, 8, 4, 3, 3, 2, 1, 2, 1, 2, 1, 2},
      {3, 5, 5, 7, 6, 1, 3, 0, 2, 1, 2, 1, 2},
      {2, 12, 7, 5, 12, 3, 3, 1, 1, 2, 2, 1, 1, 12},  // depthwise, stride 2
      {1, 10, 4, 5, 7, 1, 1},                         // 1x1
      {2, 9, 6, 6, 11, 2, 2, 0, 1, 2, 2, 2, 1, 1},
  };
  return all;
}

// The inputs of the passes of g in NHWC (memory order), each value already what the tested dtype
// holds (`representable` rounds to it), and the double reference of each result: y = conv(x, w)
// + bias, dx, dw = dw0 + the filter gradient, db = db0 + the sums of dy; *_abs the same on
// absolute values (sum|terms|, for the error bounds).
struct NhwcProblem {
  std::vector<double> x, w, bias, dy, dw0, db0;
  std::vector<double> y, dx, dw, db;
  std::vector<double> y_abs, dx_abs, dw_abs, db_abs;
};

inline NhwcProblem nhwc_problem(const Conv2dGeometry& g, uint64_t seed,
                                const std::function<double(double)>& representable) {
  Random rng(seed);
  auto values = [&](int64_t count, bool rounded) {
    std::vector<double> v(static_cast<size_t>(count));
    for (double& x : v) {
      x = double(float(rng.uniform(-1.0, 1.0)));
      if (rounded) x = representable(x);
    }
    return v;
  };
  auto abs_of = [](std::vector<double> v) {
    for (double& x : v) x = std::fabs(x);
    return v;
  };
  NhwcProblem p;
  p.x = values(shape_numel(g.x_shape()), true);
  p.w = values(shape_numel(g.w_shape()), true);
  p.bias = values(g.K, false);  // the parameters are f32 (or f64) in every dtype
  p.dy = values(shape_numel(g.y_shape()), true);
  p.dw0 = values(shape_numel(g.w_shape()), false);
  p.db0 = values(g.K, false);
  const std::vector<double> ax = abs_of(p.x), aw = abs_of(p.w), ady = abs_of(p.dy);
  const std::vector<double> abias = abs_of(p.bias);
  p.y.resize(p.dy.size());
  p.y_abs.resize(p.dy.size());
  p.dx.resize(p.x.size());
  p.dx_abs.resize(p.x.size());
  p.dw = p.dw0;
  p.dw_abs = abs_of(p.dw0);
  p.db = p.db0;
  p.db_abs = abs_of(p.db0);
  ref::conv2d_forward_nhwc(g, p.x.data(), p.w.data(), p.bias.data(), p.y.data());
  ref::conv2d_forward_nhwc(g, ax.data(), aw.data(), abias.data(), p.y_abs.data());
  ref::conv2d_backward_data_nhwc(g, p.dy.data(), p.w.data(), p.dx.data());
  ref::conv2d_backward_data_nhwc(g, ady.data(), aw.data(), p.dx_abs.data());
  ref::conv2d_backward_filter_nhwc(g, p.x.data(), p.dy.data(), p.dw.data());
  ref::conv2d_backward_filter_nhwc(g, ax.data(), ady.data(), p.dw_abs.data());
  const int64_t rows = g.N * g.P() * g.Q();
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t k = 0; k < g.K; ++k) {
      p.db[size_t(k)] += p.dy[size_t(m * g.K + k)];
      p.db_abs[size_t(k)] += ady[size_t(m * g.K + k)];
    }
  }
  return p;
}

// Every |got - want| <= bound(i) (a NaN, an element never written, fails); the first few
// elements off are reported.
inline void expect_within(const std::string& what, const std::vector<double>& got,
                          const std::vector<double>& want,
                          const std::function<double(size_t)>& bound) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 3; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= bound(i))) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (bound "
                    << bound(i) << ")";
    }
  }
}

}  // namespace crema::kernels::conv_test
