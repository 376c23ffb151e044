// Tensor ops on CUDA: every op and every version against ref<double> on the awkward shapes of the
// CPU tests with every blend (beta = 0 on NaN, beta = 1, alpha = 0.5), the reduction's indices
// exactly and its bits run to run, transform for every 4-D order, and the dispatch from device
// tensors. The fast versions' own paths (long rows, misaligned pointers, large reductions):
// tensor_ops_paths_cuda_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/layout/layout.h"
#include "kernels/tensor_ops/tensor_ops.h"
#include "tests/kernels/kernel_cuda_test_util.h"
#include "tests/kernels/tensor_ops_cuda_test_util.h"
#include "tests/kernels/tensor_ops_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::Blend;
using testing::host_values;
using testing::kBlends;
using testing::rel_error;
using testing::to_device;

TEST(TensorOpsCuda, OpTensorMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(3);
  for (cuda::OpTensorVersion version : testing::kOpTensorVersions) {
    for (OpTensorOp op : testing::kOpTensorOps) {
      for (const testing::BroadcastCase& bc : testing::kBroadcastCases) {
        for (const Blend& blend : kBlends) {
          SCOPED_TRACE(std::string(op_tensor_op_name(op)) + " c " + shape_str(bc.c) + " b " +
                       shape_str(bc.b) + " " + testing::blend_str(blend) + " version " +
                       std::to_string(int(version)));
          const Tensor a = testing::op_input(rng, bc.c, op == OpTensorOp::sqrt, false);
          const Tensor b = testing::op_input(rng, bc.b, false, false);
          const Tensor c = testing::prior_output(rng, bc.c, blend);
          const std::vector<double> want = testing::ref_op_tensor(op, blend, a, b, c);
          const Tensor ag = to_device(ctx, a), bg = to_device(ctx, b);
          Tensor cg = to_device(ctx, c);
          cuda::op_tensor(op, make_broadcast_plan(bc.c, bc.b), float(blend.alpha), ag.data<float>(),
                          float(testing::kAlpha2), bg.data<float>(), float(blend.beta),
                          cg.data<float>(), version, ctx.stream());
          EXPECT_LT(rel_error(host_values(ctx, cg), want), testing::kOpTensorTol);
        }
      }
    }
  }
}

TEST(TensorOpsCuda, ReduceMatchesReferenceWithIndicesAndIsDeterministic) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(4);
  std::vector<testing::ReduceCase> cases = testing::kReduceCases;
  cases.push_back({{3, 100000}, {3, 1}});  // many elements per block: the tree's order matters
  for (cuda::ReduceTensorVersion version : testing::kReduceTensorVersions) {
    for (ReduceOp op : testing::kReduceOps) {
      const bool products = op == ReduceOp::mul || op == ReduceOp::mul_no_zeros;
      for (const testing::ReduceCase& rc : cases) {
        if (products && shape_numel(rc.x) > 10000) continue;  // the product leaves float's range
        for (const Blend& blend : kBlends) {
          SCOPED_TRACE(std::string(reduce_op_name(op)) + " x " + shape_str(rc.x) + " y " +
                       shape_str(rc.y) + " " + testing::blend_str(blend) + " version " +
                       std::to_string(int(version)));
          testing::check_reduce(ctx, rng, op, rc, blend, version, 0);
        }
      }
    }
  }
}

TEST(TensorOpsCuda, TransformMatchesReferenceForEveryOrder) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(5);
  const Shape shapes[] = {{2, 3, 5, 7}, {1, 4, 1, 9}, {3, 1, 2, 1}, {2, 33, 17, 31}};
  for (const Shape& s : shapes) {
    std::vector<int> order = {0, 1, 2, 3};
    do {
      for (const Blend& blend : kBlends) {
        SCOPED_TRACE(shape_str(s) + " order " + std::to_string(order[0]) +
                     std::to_string(order[1]) + std::to_string(order[2]) +
                     std::to_string(order[3]) + " " + testing::blend_str(blend));
        const Tensor x = testing::random_tensor(rng, s);
        const Tensor y = testing::prior_output(rng, permuted_shape(s, order), blend);
        const std::vector<double> want = testing::ref_transform(blend, x, order, y);
        const Tensor xg = to_device(ctx, x);
        Tensor yg = to_device(ctx, y);
        transform_tensor(ctx, blend.alpha, xg, order, blend.beta, yg);
        EXPECT_LT(rel_error(host_values(ctx, yg), want), testing::kOpTensorTol);
        for (cuda::TransformVersion version : testing::kTransformVersions) {
          Tensor yv = to_device(ctx, y);
          cuda::transform_tensor(make_permute_map(s, order), x.numel(), float(blend.alpha),
                                 xg.data<float>(), float(blend.beta), yv.data<float>(), version,
                                 ctx.stream());
          EXPECT_LT(rel_error(host_values(ctx, yv), want), testing::kOpTensorTol)
              << "version " << int(version);
        }
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(TensorOpsCuda, TensorLevelMatchesTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context gpu(Device::cuda(0));
  Context cpu;
  Random rng(9);
  const Tensor a = testing::random_tensor(rng, {4, 5, 6}),
               b = testing::random_tensor(rng, {4, 1, 6});
  Tensor c = testing::poisoned({4, 5, 6});
  op_tensor(cpu, OpTensorOp::min, 0.5, a, 1.0, b, 0.0, c);
  const Tensor ag = to_device(gpu, a), bg = to_device(gpu, b);
  Tensor cg = testing::poisoned_device(gpu, {4, 5, 6});
  op_tensor(gpu, OpTensorOp::min, 0.5, ag, 1.0, bg, 0.0, cg);
  EXPECT_TRUE(testing::same_bits(host_values(gpu, cg), c.to_vector()));

  Tensor y({1, 5, 1}), idx({1, 5, 1});
  reduce_tensor(cpu, ReduceOp::max, 1.0, a, 0.0, y, &idx);
  Tensor yg = testing::poisoned_device(gpu, {1, 5, 1}),
         ig = testing::poisoned_device(gpu, {1, 5, 1});
  reduce_tensor(gpu, ReduceOp::max, 1.0, ag, 0.0, yg, &ig);
  EXPECT_TRUE(testing::same_bits(host_values(gpu, yg), y.to_vector()));
  EXPECT_TRUE(testing::same_bits(host_values(gpu, ig), idx.to_vector()));

  Tensor s = testing::poisoned_device(gpu, {1000});
  set_tensor(gpu, s, 3.0);
  scale_tensor(gpu, s, -0.5);
  EXPECT_EQ(host_values(gpu, s), std::vector<float>(1000, -1.5f));
}

}  // namespace
}  // namespace crema::kernels
