// cuDNN's tensor operations (cudnnOpTensor, cudnnReduceTensor, cudnnTransformTensor,
// cudnnSetTensor, cudnnScaleTensor): the primitives crema's layers never needed, for programs
// that link crema as their "cuDNN". Every one blends its result into its output,
// out = alpha * result + beta * out, and reads out only when beta != 0 (so out may hold NaN).
//
//   op-tensor:  C = op(alpha1 * A, alpha2 * B) + beta * C
//       add: a + b   mul: a * b   min: min(a, b)   max: max(a, b)
//       sqrt: sqrt(a)   logical_not: 1 - a  (unary: B is not read and may be undefined)
//     A has C's shape; B has C's rank with each extent equal to C's or 1 (broadcast along it).
//     C may be A (in place); it may be B only when B is not broadcast.
//   reduce-tensor:  y = alpha * reduce(x over the axes where y's extent is 1) + beta * y
//       sum: sum x   mul: prod x   max, min   amax: max |x|   avg: sum x / n
//       norm1: sum |x|   norm2: sqrt(sum x^2)   mul_no_zeros: prod of the x != 0 (1 if none)
//     y has x's rank, each extent x's or 1 (the reduced axes stay, as size 1). For max, min and
//     amax `indices` (optional, y's shape) receives the flat row-major index within the reduced
//     axes of the first element that attains the result (cuDNN's flattened indices), written
//     unblended as a float (exact below 2^24; larger reductions are refused).
//   transform-tensor:  y = alpha * x.permute(order) + beta * y
//     any permutation of the axes (NCHW -> NHWC is [0, 2, 3, 1]); x and y may differ in dtype
//     (f32 <-> f64, on the CPU).
//   transform-strided:  y = alpha * x + beta * y  with x and y of one shape, each walked by its
//     own strides in elements (any order, none negative; y's elements distinct): cuDNN's
//     cudnnTransformTensor on strided descriptors, the gather/scatter of kernels/api/.
//   set-tensor: y = value.   scale-tensor: y = alpha * y.
//
// All of them take up to kMaxTensorOpDims axes. Reductions accumulate in double (max, min and
// amax compare in float on CUDA, which is exact), each output in a fixed order: the same bits on
// every run, thread count and grid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/tensor_ops/tensor_ops_math.h"

namespace crema::kernels {

const char* op_tensor_op_name(OpTensorOp op);
const char* reduce_op_name(ReduceOp op);

// The plans the fast paths walk (tensor_ops_math.h). Shapes are already checked.
BroadcastPlan make_broadcast_plan(const Shape& c_shape, const Shape& b_shape);
ReducePlan make_reduce_plan(const Shape& x_shape, const Shape& y_shape);
// y's flat index -> x's offset for y = x.permute(order).
IndexMap make_permute_map(const Shape& x_shape, const std::vector<int>& order);
// x's and y's strides over one shape, extent-1 axes dropped, axes sorted by y's strides (largest
// first) and neighbours merged where both stay contiguous.
StridedPlan make_strided_plan(const Shape& shape, const std::vector<int64_t>& x_stride,
                              const std::vector<int64_t>& y_stride);

namespace ref {
// Plain loops over the definitions, every tensor walked by its multi-index; the oracle of the
// tests. Instantiated for float and double (transform_tensor for each pair of them).
template <class T>
void op_tensor(OpTensorOp op, int ndim, const int64_t* c_shape, const int64_t* b_shape, T alpha1,
               const T* a, T alpha2, const T* b, T beta, T* c);
template <class T>
void reduce_tensor(ReduceOp op, int ndim, const int64_t* x_shape, const int64_t* y_shape, T alpha,
                   const T* x, T beta, T* y, T* indices);
template <class Tx, class Ty>
void transform_tensor(int ndim, const int64_t* x_shape, const int* order, Ty alpha, const Tx* x,
                      Ty beta, Ty* y);
template <class T>
void transform_strided(int ndim, const int64_t* shape, const int64_t* x_stride,
                       const int64_t* y_stride, T alpha, const T* x, T beta, T* y);
template <class T>
void set_tensor(int64_t n, T value, T* y);
template <class T>
void scale_tensor(int64_t n, T alpha, T* y);
}  // namespace ref

namespace cpu {
// OpenMP over rows of C's innermost plan axis (op-tensor), over outputs (reduce-tensor: each one
// accumulated in double by one thread), over rows of y (transform), over chunks (set, scale).
void op_tensor(OpTensorOp op, const BroadcastPlan& plan, float alpha1, const float* a, float alpha2,
               const float* b, float beta, float* c, int num_threads);
void reduce_tensor(ReduceOp op, const ReducePlan& plan, float alpha, const float* x, float beta,
                   float* y, float* indices, int num_threads);
void transform_tensor(const IndexMap& y_to_x, float alpha, const float* x, float beta, float* y,
                      int num_threads);
void transform_strided(const StridedPlan& plan, float alpha, const float* x, float beta, float* y,
                       int num_threads);
void set_tensor(int64_t n, float value, float* y, int num_threads);
void scale_tensor(int64_t n, float alpha, float* y, int num_threads);
}  // namespace cpu

namespace cuda {
// The versions of the CUDA paths (README.md, "Versions"); production runs `best`.
//   op_tensor  elementwise: one thread per element of C, B's offset decoded from the plan per
//                element (grid-stride);
//              row_vectors: C as rows of the plan's innermost axis (B's stride along it is 0 or
//                1: one B value per row, or a row of B), 32 to 256 threads per row and 4 items
//                each (float4 where aligned), B's row offset decoded once per row; rows shorter
//                than kMinRow go the elementwise way.
enum class OpTensorVersion { elementwise, row_vectors, best = row_vectors };
//   reduce_tensor  block_per_output: one block of 256 threads per output, each thread
//                    accumulating every 256th reduced element in double, then a fixed tree;
//                  split: each output's reduced elements cut into chunks fixed by the sizes, a
//                    warp per chunk where the reduced run is contiguous (16-byte loads), a thread
//                    per chunk otherwise; partials in the workspace combined in a fixed order by
//                    a second kernel (tensor_ops_reduce_cuda.cu).
enum class ReduceTensorVersion { block_per_output, split, best = split };
//   transform_tensor  index_map: one thread per element of y, x's offset decoded from the plan
//                       (gathered reads);
//                     tiled: a permutation that is a batched transpose (NCHW <-> NHWC) runs
//                       kernels/layout's 32 x 32 tiles, blending; any other takes index_map.
enum class TransformVersion { index_map, tiled, best = tiled };
// Rows (op_tensor's innermost plan axis) shorter than this take the elementwise kernel.
constexpr int64_t kMinRow = 32;

void op_tensor(OpTensorOp op, const BroadcastPlan& plan, float alpha1, const float* a, float alpha2,
               const float* b, float beta, float* c, OpTensorVersion version, gpu::Stream stream);
// Bytes of device workspace reduce_tensor needs for `plan` (0 when one pass does).
size_t reduce_tensor_workspace_bytes(const ReducePlan& plan, ReduceTensorVersion version);
void reduce_tensor(ReduceOp op, const ReducePlan& plan, float alpha, const float* x, float beta,
                   float* y, float* indices, void* workspace, ReduceTensorVersion version,
                   gpu::Stream stream);
void transform_tensor(const IndexMap& y_to_x, int64_t count, float alpha, const float* x,
                      float beta, float* y, TransformVersion version, gpu::Stream stream);
// transform_strided: one thread per element, both offsets decoded from the plan. set_tensor,
// scale_tensor: grid-stride maps.
void transform_strided(const StridedPlan& plan, float alpha, const float* x, float beta, float* y,
                       gpu::Stream stream);
void set_tensor(int64_t n, float value, float* y, gpu::Stream stream);
void scale_tensor(int64_t n, float alpha, float* y, gpu::Stream stream);
}  // namespace cuda

// Tensor level: f32 tensors (CPU or CUDA) or f64 on the CPU (which runs ref::), all of one dtype
// (transform_tensor: x and y may differ on the CPU); crema::Error naming the tensor for a wrong
// shape, dtype, device, rank or alias. `b` may be undefined for the unary ops; `indices` may be
// null, and must be for the reductions that have none.
void op_tensor(Context& ctx, OpTensorOp op, double alpha1, const Tensor& a, double alpha2,
               const Tensor& b, double beta, Tensor& c);
void reduce_tensor(Context& ctx, ReduceOp op, double alpha, const Tensor& x, double beta, Tensor& y,
                   Tensor* indices = nullptr);
void transform_tensor(Context& ctx, double alpha, const Tensor& x, const std::vector<int>& order,
                      double beta, Tensor& y);
void set_tensor(Context& ctx, Tensor& y, double value);
void scale_tensor(Context& ctx, Tensor& y, double alpha);
// Raw pointers on the context's device (f32, or f64 on the CPU): y = alpha * x + beta * y over
// `shape`, x and y each walked by its strides (checked by the caller: kernels/api/ validates its
// descriptors). y is not read when beta is 0.
void transform_strided(Context& ctx, DType dtype, const Shape& shape,
                       const std::vector<int64_t>& x_stride, const void* x,
                       const std::vector<int64_t>& y_stride, double alpha, double beta, void* y);

}  // namespace crema::kernels
