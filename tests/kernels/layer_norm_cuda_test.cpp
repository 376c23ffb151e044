// LayerNorm kernels on CUDA against ref<double> and within float32 rounding of the CPU path, on
// awkward shapes: rows (the last axis: C below, at and above a warp, ConvNeXt's 768) and columns
// (the channels of NCHW: N = 1, odd H and W, C not a multiple of 8), with and without weight and
// bias, dx aliasing dy, poisoned outputs, repeat runs bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/layer_norm/layer_norm.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::host_values;

struct Case {
  Shape shape;
  int axis;
};

TEST(LayerNormCuda, MatchesReferenceOnAwkwardShapes) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const std::vector<Case> cases = {{{1, 1}, 1},         {{5, 7}, 1},        {{3, 32}, 1},
                                   {{7, 33}, 1},        {{2, 3, 768}, 2},   {{1, 13, 7, 7}, 1},
                                   {{3, 5, 17, 19}, 1}, {{2, 96, 1, 1}, 1}, {{4, 7, 33}, 1},
                                   {{2, 3, 5, 11}, 3},  {{1, 1, 9, 9}, 1},  {{8, 96, 56, 56}, 1},
                                   {{8, 56, 56, 96}, 3}};
  uint64_t seed = 20;
  for (const Case& c : cases) {
    for (bool affine : {true, false}) {
      SCOPED_TRACE(shape_str(c.shape) + " axis " + std::to_string(c.axis) +
                   (affine ? "" : " no affine"));
      const int64_t C = c.shape[size_t(c.axis)], positions = shape_numel(c.shape) / C;
      const int64_t outer = shape_count(c.shape, 0, c.axis);
      const int64_t inner = shape_count(c.shape, c.axis + 1, int(c.shape.size()));
      Random rng(++seed);
      const Tensor x = testing::random_tensor(rng, c.shape, -2, 3);
      const Tensor dy = testing::random_tensor(rng, c.shape);
      const Tensor w = testing::random_tensor(rng, {C}, 0.5, 1.5);
      const Tensor b = testing::random_tensor(rng, {C});
      const std::vector<double> xd = testing::to_double(x), dyd = testing::to_double(dy);
      const std::vector<double> wd = testing::to_double(w), bd = testing::to_double(b);
      std::vector<double> y_ref(xd.size()), dx_ref(xd.size()), h_ref(xd.size());
      std::vector<double> m_ref(static_cast<size_t>(positions)),
          r_ref(static_cast<size_t>(positions));
      ref::layer_norm_forward(outer, C, inner, xd.data(), affine ? wd.data() : nullptr,
                              affine ? bd.data() : nullptr, 1e-6f, y_ref.data(), m_ref.data(),
                              r_ref.data());
      ref::layer_norm_backward(outer, C, inner, xd.data(), dyd.data(), affine ? wd.data() : nullptr,
                               m_ref.data(), r_ref.data(), dx_ref.data(), h_ref.data());

      const Tensor xg = testing::to_device(ctx, x), dyg = testing::to_device(ctx, dy);
      const Tensor wg = testing::to_device(ctx, w), bg = testing::to_device(ctx, b);
      std::vector<float> first_y, first_dx;
      for (int run = 0; run < 2; ++run) {
        Tensor y = testing::poisoned_device(ctx, c.shape),
               dx = testing::poisoned_device(ctx, c.shape);
        Tensor h = testing::poisoned_device(ctx, c.shape);
        Tensor m = testing::poisoned_device(ctx, {positions});
        Tensor r = testing::poisoned_device(ctx, {positions});
        layer_norm_forward(ctx, xg, affine ? &wg : nullptr, affine ? &bg : nullptr, c.axis, 1e-6f,
                           y, m, r);
        layer_norm_backward(ctx, xg, dyg, affine ? &wg : nullptr, m, r, c.axis, dx, &h);
        const std::vector<float> yv = host_values(ctx, y), dxv = host_values(ctx, dx);
        EXPECT_LT(testing::rel_error(yv, y_ref), 2e-6);
        EXPECT_LT(testing::rel_error(host_values(ctx, m), m_ref), 2e-6);
        EXPECT_LT(testing::rel_error(host_values(ctx, r), r_ref), 2e-6);
        EXPECT_LT(testing::rel_error(dxv, dx_ref), 1e-5);
        EXPECT_LT(testing::rel_error(host_values(ctx, h), h_ref), 2e-6);
        if (run == 0) {
          first_y = yv;
          first_dx = dxv;
        } else {
          EXPECT_TRUE(testing::same_bits(yv, first_y));
          EXPECT_TRUE(testing::same_bits(dxv, first_dx));
        }
        // dx written over dy: the same values.
        Tensor g = testing::to_device(ctx, dy);
        layer_norm_backward(ctx, xg, g, affine ? &wg : nullptr, m, r, c.axis, g, nullptr);
        EXPECT_TRUE(testing::same_bits(host_values(ctx, g), dxv));
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
