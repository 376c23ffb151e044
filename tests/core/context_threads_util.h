// The work the Context thread tests run on each context: a convolution forward, then a GEMM on its
// output, on operands drawn from `seed` -- both through the Tensor-level dispatch, so on a GPU both
// go through the device guard and the context's stream and allocator. Returns the result on the
// host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/convolution/convolution.h"
#include "kernels/gemm/gemm.h"

namespace crema::testing {

inline Tensor random_on(Context& ctx, const Shape& shape, Random& random) {
  std::vector<float> values(size_t(shape_numel(shape)));
  for (float& v : values) v = float(random.uniform(-1.0, 1.0));
  Tensor t = ctx.empty(shape);
  ctx.copy(t, Tensor::from_vector(shape, values));
  return t;
}

inline std::vector<float> context_work(Context& ctx, uint64_t seed) {
  Random random(seed);
  kernels::Conv2dGeometry g{3, 5, 13, 11, 8, 3, 3};
  g.pad_h = g.pad_w = 1;
  const Tensor x = random_on(ctx, g.x_shape(), random);
  const Tensor w = random_on(ctx, g.w_shape(), random);
  Tensor y = ctx.empty(g.y_shape());
  kernels::conv2d_forward(ctx, g, x, w, nullptr, y);
  // [N*K, P*Q] times [P*Q, 7]
  const Tensor b = random_on(ctx, {g.P() * g.Q(), 7}, random);
  const Tensor a = y.view({g.N * g.K, g.P() * g.Q()});
  Tensor c = ctx.empty({g.N * g.K, 7});
  kernels::gemm(ctx, false, false, 1.0f, a, b, 0.0f, c);
  ctx.synchronize();
  return c.to_vector();
}

}  // namespace crema::testing
