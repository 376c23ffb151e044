// What the CUDA tests of the tensor ops share: every version of each CUDA path, the device
// workspace a reduction asks for, and one reduction checked against the reference.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "core/context.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/tensor_ops/tensor_ops.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/tensor_ops_test_util.h"

namespace crema::kernels::testing {

inline const cuda::OpTensorVersion kOpTensorVersions[] = {cuda::OpTensorVersion::elementwise,
                                                          cuda::OpTensorVersion::row_vectors};
inline const cuda::ReduceTensorVersion kReduceTensorVersions[] = {
    cuda::ReduceTensorVersion::block_per_output, cuda::ReduceTensorVersion::split};
inline const cuda::TransformVersion kTransformVersions[] = {cuda::TransformVersion::index_map,
                                                            cuda::TransformVersion::tiled};

// A device buffer of at least the workspace `plan` needs (one float when it needs none).
inline Tensor reduce_workspace(Context& ctx, const ReducePlan& plan,
                               cuda::ReduceTensorVersion version) {
  const size_t bytes = cuda::reduce_tensor_workspace_bytes(plan, version);
  return ctx.empty({int64_t(bytes / sizeof(float)) + 1});
}

// `host`'s values on the device `offset` floats past a buffer's start (offset 1: a pointer off
// 16-byte alignment, which the vector paths must notice).
inline Tensor device_at(Context& ctx, const Tensor& host, int offset) {
  std::vector<float> values(size_t(offset), 0.0f);
  const std::vector<float> v = host.to_vector();
  values.insert(values.end(), v.begin(), v.end());
  return to_device(ctx, {int64_t(values.size())}, values);
}

// cuda::reduce_tensor(op) of case `rc` in `version`, x read `offset` floats past alignment:
// against the reference (values within kReduceTol, indices exactly) and bit-identical on a
// second run.
inline void check_reduce(Context& ctx, Random& rng, ReduceOp op, const ReduceCase& rc,
                         const Blend& blend, cuda::ReduceTensorVersion version, int offset) {
  const bool products = op == ReduceOp::mul || op == ReduceOp::mul_no_zeros;
  const Tensor x = op_input(rng, rc.x, false, products);
  const Tensor y = prior_output(rng, rc.y, blend);
  const bool indexed = detail::reduce_has_indices(op);
  std::vector<double> want_indices;
  const std::vector<double> want = ref_reduce(op, blend, x, y, indexed ? &want_indices : nullptr);
  const Tensor xg = device_at(ctx, x, offset);
  const ReducePlan plan = make_reduce_plan(rc.x, rc.y);
  Tensor workspace = reduce_workspace(ctx, plan, version);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Tensor yg = to_device(ctx, y);
    Tensor indices = poisoned_device(ctx, rc.y);
    cuda::reduce_tensor(op, plan, float(blend.alpha), xg.data<float>() + offset, float(blend.beta),
                        yg.data<float>(), indexed ? indices.data<float>() : nullptr,
                        workspace.data<float>(), version, ctx.stream());
    const std::vector<float> got = host_values(ctx, yg);
    EXPECT_LT(rel_error(got, want), kReduceTol);
    if (indexed) {
      EXPECT_EQ(rel_error(host_values(ctx, indices), want_indices), 0.0);
    }
    if (run == 0) first = got;
    EXPECT_TRUE(same_bits(first, got));
  }
}

}  // namespace crema::kernels::testing
