// The fast CUDA paths of the tensor ops on the shapes that reach them, against ref<double>:
// op_tensor's rows (long rows of a per-row B value, of a B row, of a B of C's shape; float4 and
// float rows; misaligned pointers; in place), reduce_tensor's split (lanes along r with and
// without vectors, several chunks per output, lanes along o; a one-element reduction, an odd
// ~10M-element one; NaN among the elements of max, min and amax; misaligned x; bits run to run)
// and transform_tensor's tiled NCHW <-> NHWC with blending.
#include <gtest/gtest.h>

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

// A device copy of `host` starting `offset` floats into its buffer (offset 1: a pointer that is
// 4- but not 16-byte aligned). The buffer is returned; the data starts at buffer + offset.
std::vector<float> values_at(Context& ctx, const Tensor& buffer, int offset) {
  const std::vector<float> all = host_values(ctx, buffer);
  return {all.begin() + offset, all.end()};
}

// (C, B) whose plan's innermost axis is a row of at least kMinRow (32): B per row ([1, C, 1, 1]),
// a row of B, B of C's shape (one row), rows of 4k and of odd length, long rows and short ones.
const std::vector<testing::BroadcastCase> kRowCases = {
    {{2, 3, 20, 28}, {1, 3, 1, 1}},    // rows of 560 (float4), one B value per row
    {{3, 5, 131}, {1, 5, 1}},          // rows of 131 (floats)
    {{2, 4096}, {1, 4096}},            // a row of B for every row of C
    {{1, 7, 3, 129}, {1, 1, 3, 129}},  // rows of 387 with a row of B, B's outer stride 0
    {{5003}, {5003}},                  // B of C's shape: one odd row
    {{3, 2, 1100}, {3, 2, 1100}},      // one row of 6600 (float4), several blocks
    {{2, 600}, {1, 1}},                // B one value
    {{4, 6, 7, 7}, {1, 6, 1, 1}},      // rows of 49: 32 threads a row, 8 rows a block
    {{3, 5, 14, 14}, {1, 5, 1, 1}},    // rows of 196 (49 float4): 32 threads a row
    {{2, 3, 40}, {2, 3, 1}},           // rows of 40 (10 float4)
};

TEST(TensorOpsPathsCuda, OpTensorRowsMatchReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(31);
  for (cuda::OpTensorVersion version : testing::kOpTensorVersions) {
    for (OpTensorOp op : testing::kOpTensorOps) {
      for (const testing::BroadcastCase& bc : kRowCases) {
        for (const Blend& blend : kBlends) {
          for (int offset : {0, 1}) {
            SCOPED_TRACE(std::string(op_tensor_op_name(op)) + " c " + shape_str(bc.c) + " b " +
                         shape_str(bc.b) + " " + testing::blend_str(blend) + " version " +
                         std::to_string(int(version)) + " offset " + std::to_string(offset));
            const Tensor a = testing::op_input(rng, bc.c, op == OpTensorOp::sqrt, false);
            const Tensor b = testing::op_input(rng, bc.b, false, false);
            const Tensor c = testing::prior_output(rng, bc.c, blend);
            const std::vector<double> want = testing::ref_op_tensor(op, blend, a, b, c);
            const Tensor ag = testing::device_at(ctx, a, offset);
            const Tensor bg = testing::device_at(ctx, b, offset);
            Tensor cg = testing::device_at(ctx, c, offset);
            cuda::op_tensor(op, make_broadcast_plan(bc.c, bc.b), float(blend.alpha),
                            ag.data<float>() + offset, float(testing::kAlpha2),
                            bg.data<float>() + offset, float(blend.beta), cg.data<float>() + offset,
                            version, ctx.stream());
            EXPECT_LT(rel_error(values_at(ctx, cg, offset), want), testing::kOpTensorTol);
          }
        }
      }
    }
  }
}

TEST(TensorOpsPathsCuda, OpTensorInPlaceOnRows) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(32);
  const Shape cs{2, 3, 20, 28}, bs{1, 3, 1, 1};
  const Blend blend{0.5, 0.25};
  const Tensor a = testing::random_tensor(rng, cs), b = testing::random_tensor(rng, bs);
  // C = A: the blend reads the A it overwrites.
  const std::vector<double> want = testing::ref_op_tensor(OpTensorOp::add, blend, a, b, a);
  for (cuda::OpTensorVersion version : testing::kOpTensorVersions) {
    Tensor ag = testing::to_device(ctx, a);
    const Tensor bg = testing::to_device(ctx, b);
    cuda::op_tensor(OpTensorOp::add, make_broadcast_plan(cs, bs), float(blend.alpha),
                    ag.data<float>(), float(testing::kAlpha2), bg.data<float>(), float(blend.beta),
                    ag.data<float>(), version, ctx.stream());
    EXPECT_LT(rel_error(host_values(ctx, ag), want), testing::kOpTensorTol) << int(version);
  }
}

// (x, y) reaching each split path: lanes along r with float4 (R % 4 == 0) and floats, one chunk
// and several; lanes along o (the innermost axis kept, or a short reduced run), one chunk and
// several; one element.
const std::vector<testing::ReduceCase> kSplitCases = {
    {{1, 1, 1, 1}, {1, 1, 1, 1}},   // one element, reduced over nothing
    {{1}, {1}},                     //
    {{4, 3, 8, 16}, {4, 3, 1, 1}},  // sum over H x W: rows of 128, float4, one chunk
    {{5, 8193}, {5, 1}},            // rows of 8193: 5 chunks of 2048, floats
    {{2, 20000}, {2, 1}},           // 10 chunks of 2048, float4, a short last one
    {{3, 7, 9}, {3, 1, 1}},         // a run of 63: lanes along r, floats
    {{6, 5, 7}, {6, 5, 1}},         // runs of 7: lanes along o
    {{40000, 3}, {1, 3}},           // reduced stride 3: lanes along o, many chunks
    {{64, 33, 5}, {1, 33, 1}},      // reduced [64, 5]: two reduced axes, lanes along o
    {{9, 2, 40}, {1, 2, 1}},        // reduced [9, 40] with the innermost run 40: lanes along r
};

TEST(TensorOpsPathsCuda, ReduceSplitPathsMatchReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(33);
  for (ReduceOp op : testing::kReduceOps) {
    const bool products = op == ReduceOp::mul || op == ReduceOp::mul_no_zeros;
    for (const testing::ReduceCase& rc : kSplitCases) {
      if (products && shape_numel(rc.x) > 10000) continue;  // the product leaves float's range
      for (const Blend& blend : kBlends) {
        for (int offset : {0, 1}) {
          SCOPED_TRACE(std::string(reduce_op_name(op)) + " x " + shape_str(rc.x) + " y " +
                       shape_str(rc.y) + " " + testing::blend_str(blend) + " offset " +
                       std::to_string(offset));
          testing::check_reduce(ctx, rng, op, rc, blend, cuda::ReduceTensorVersion::split, offset);
        }
      }
    }
  }
}

TEST(TensorOpsPathsCuda, ReduceSplitOverTenMillionElements) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(34);
  // all: an odd count (floats), 2441 chunks of 4096 and a short one (combined by a block); sums
  // of 10^7 terms.
  // rows: 5 outputs of 2000004 (float4), 489 chunks of 4096 each (combined by a warp).
  const testing::ReduceCase all{{10000019}, {1}}, rows{{5, 2000004}, {5, 1}};
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::amax, ReduceOp::avg,
                      ReduceOp::norm1, ReduceOp::norm2}) {
    for (const testing::ReduceCase& rc : {all, rows}) {
      SCOPED_TRACE(std::string(reduce_op_name(op)) + " x " + shape_str(rc.x));
      testing::check_reduce(ctx, rng, op, rc, kBlends[1], cuda::ReduceTensorVersion::split, 0);
    }
  }
}

// max, min and amax skip a NaN as the reference does (a NaN never wins a comparison); a row of
// NaN only gives the identity (-inf or inf) at the reference's index.
TEST(TensorOpsPathsCuda, ReduceSplitSkipsNanLikeTheReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(35);
  const Shape xs{4, 9000}, ys{4, 1};
  std::vector<float> v = testing::random_values(rng, shape_numel(xs));
  for (size_t i = 0; i < v.size(); i += 7) v[i] = testing::kNaN;      // every 7th, x[0, 0] first
  for (size_t i = 3 * 9000; i < v.size(); ++i) v[i] = testing::kNaN;  // row 3: NaN only
  const Tensor x = Tensor::from_vector(xs, v);
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min, ReduceOp::amax}) {
    for (cuda::ReduceTensorVersion version : testing::kReduceTensorVersions) {
      SCOPED_TRACE(std::string(reduce_op_name(op)) + " version " + std::to_string(int(version)));
      const Tensor y = testing::poisoned(ys);
      std::vector<double> want_indices;
      const std::vector<double> want = testing::ref_reduce(op, kBlends[0], x, y, &want_indices);
      const Tensor xg = testing::to_device(ctx, x);
      const ReducePlan plan = make_reduce_plan(xs, ys);
      Tensor workspace = testing::reduce_workspace(ctx, plan, version);
      Tensor yg = testing::poisoned_device(ctx, ys), ig = testing::poisoned_device(ctx, ys);
      cuda::reduce_tensor(op, plan, 1.0f, xg.data<float>(), 0.0f, yg.data<float>(),
                          ig.data<float>(), workspace.data<float>(), version, ctx.stream());
      const std::vector<float> got = host_values(ctx, yg), got_indices = host_values(ctx, ig);
      for (size_t o = 0; o < want.size(); ++o) {
        EXPECT_EQ(double(got[o]), double(float(want[o]))) << "output " << o;
        EXPECT_EQ(double(got_indices[o]), double(float(want_indices[o]))) << "output " << o;
      }
    }
  }
}

TEST(TensorOpsPathsCuda, TransformTiledMatchesReference) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  Random rng(36);
  // NCHW -> NHWC and back on odd sizes (partial tiles), N = 1 (a 2-axis map) and C = 1 (a copy).
  const Shape shapes[] = {{2, 37, 9, 11}, {1, 33, 5, 7}, {3, 64, 8, 8}, {2, 1, 5, 6}};
  for (const Shape& s : shapes) {
    for (const std::vector<int>& order : {std::vector<int>{0, 2, 3, 1}, {0, 3, 1, 2}}) {
      for (const Blend& blend : kBlends) {
        for (cuda::TransformVersion version : testing::kTransformVersions) {
          SCOPED_TRACE(shape_str(s) + " order " + std::to_string(order[1]) +
                       std::to_string(order[2]) + std::to_string(order[3]) + " " +
                       testing::blend_str(blend) + " version " + std::to_string(int(version)));
          const Tensor x = testing::random_tensor(rng, s);
          const Tensor y = testing::prior_output(rng, permuted_shape(s, order), blend);
          const std::vector<double> want = testing::ref_transform(blend, x, order, y);
          const Tensor xg = testing::to_device(ctx, x);
          Tensor yg = testing::to_device(ctx, y);
          cuda::transform_tensor(make_permute_map(s, order), x.numel(), float(blend.alpha),
                                 xg.data<float>(), float(blend.beta), yg.data<float>(), version,
                                 ctx.stream());
          EXPECT_LT(rel_error(host_values(ctx, yg), want), testing::kOpTensorTol);
        }
      }
    }
  }
}

}  // namespace
}  // namespace crema::kernels
