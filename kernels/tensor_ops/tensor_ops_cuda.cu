// Tensor ops, CUDA. One version each:
//   op_tensor, transform_tensor: one thread per output element (grid-stride), writes coalesced;
//       the input offset is decoded from the plan (B's broadcast reads hit cache, a permutation's
//       reads are gathered: the tiled transpose in kernels/layout/ is the faster road for pure
//       layout changes without blending).
//   reduce_tensor: one block per output (grid-stride over outputs); thread t accumulates reduced
//       elements t, t + 256, ... in double, then the block combines its 256 partials in a fixed
//       tree in shared memory. No atomics: the same bits on every run.
//   transform_strided: one thread per element, both offsets decoded from the plan (its axes
//       ordered by y's strides: a contiguous y is written coalesced).
//   set_tensor, scale_tensor: grid-stride maps.
#include "kernels/common/launch.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::cuda {
namespace {

constexpr int64_t kMaxBlocks = 8192;
constexpr int kReduceThreads = 256;

__global__ void op_tensor_kernel(OpTensorOp op, BroadcastPlan plan, float alpha1, const float* a,
                                 float alpha2, const float* b, float beta, float* c) {
  const bool unary = detail::op_tensor_unary(op);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < plan.count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float bv = unary ? 0.0f : alpha2 * b[offset_of(plan.b, i)];
    c[i] = detail::blend(1.0f, detail::op_tensor_apply(op, alpha1 * a[i], bv), beta, c[i]);
  }
}

__global__ void reduce_kernel(ReduceOp op, ReducePlan plan, float alpha, const float* x, float beta,
                              float* y, float* indices) {
  __shared__ double values[kReduceThreads];
  __shared__ long long index_of[kReduceThreads];
  const int t = int(threadIdx.x);
  for (int64_t o = blockIdx.x; o < plan.outputs; o += gridDim.x) {
    const float* xo = x + offset_of(plan.kept, o);
    detail::Reduced<double> acc = detail::reduce_identity<double>(op);
    for (int64_t r = t; r < plan.reduced_count; r += kReduceThreads) {
      const double v = detail::reduce_lift<double>(op, double(xo[offset_of(plan.reduced, r)]));
      acc = detail::reduce_combine<double>(op, acc, {v, r});
    }
    values[t] = acc.value;
    index_of[t] = acc.index;
    __syncthreads();
    for (int half = kReduceThreads / 2; half > 0; half /= 2) {
      if (t < half) {
        const detail::Reduced<double> merged = detail::reduce_combine<double>(
            op, {values[t], index_of[t]}, {values[t + half], index_of[t + half]});
        values[t] = merged.value;
        index_of[t] = merged.index;
      }
      __syncthreads();
    }
    if (t == 0) {
      const double value = detail::reduce_finish(op, values[0], plan.reduced_count);
      y[o] = detail::blend(alpha, float(value), beta, y[o]);
      if (indices != nullptr) indices[o] = float(plan.reduced_count == 0 ? 0 : index_of[0]);
    }
    __syncthreads();  // the arrays are reused by the next output
  }
}

__global__ void transform_kernel(IndexMap y_to_x, int64_t count, float alpha, const float* x,
                                 float beta, float* y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = detail::blend(alpha, x[offset_of(y_to_x, i)], beta, y[i]);
  }
}

__global__ void strided_kernel(StridedPlan plan, float alpha, const float* x, float beta,
                               float* y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < plan.count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float* yi = y + offset_of(plan.y, i);
    *yi = detail::blend(alpha, x[offset_of(plan.x, i)], beta, *yi);
  }
}

__global__ void set_kernel(int64_t n, float value, float* y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = value;
  }
}

__global__ void scale_kernel(int64_t n, float alpha, float* y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = alpha * y[i];
  }
}

}  // namespace

void op_tensor(OpTensorOp op, const BroadcastPlan& plan, float alpha1, const float* a, float alpha2,
               const float* b, float beta, float* c, gpu::Stream stream) {
  if (plan.count == 0) return;
  op_tensor_kernel<<<blocks_for(plan.count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
      op, plan, alpha1, a, alpha2, b, beta, c);
  gpu::check_launch("op_tensor");
}

void reduce_tensor(ReduceOp op, const ReducePlan& plan, float alpha, const float* x, float beta,
                   float* y, float* indices, gpu::Stream stream) {
  if (plan.outputs == 0) return;
  const int blocks = int(plan.outputs < 65535 ? plan.outputs : 65535);
  reduce_kernel<<<blocks, kReduceThreads, 0, stream>>>(op, plan, alpha, x, beta, y, indices);
  gpu::check_launch("reduce_tensor");
}

void transform_tensor(const IndexMap& y_to_x, int64_t count, float alpha, const float* x,
                      float beta, float* y, gpu::Stream stream) {
  if (count == 0) return;
  transform_kernel<<<blocks_for(count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
      y_to_x, count, alpha, x, beta, y);
  gpu::check_launch("transform_tensor");
}

void transform_strided(const StridedPlan& plan, float alpha, const float* x, float beta, float* y,
                       gpu::Stream stream) {
  if (plan.count == 0) return;
  strided_kernel<<<blocks_for(plan.count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
      plan, alpha, x, beta, y);
  gpu::check_launch("transform_strided");
}

void set_tensor(int64_t n, float value, float* y, gpu::Stream stream) {
  if (n == 0) return;
  set_kernel<<<blocks_for(n, kThreads, kMaxBlocks), kThreads, 0, stream>>>(n, value, y);
  gpu::check_launch("set_tensor");
}

void scale_tensor(int64_t n, float alpha, float* y, gpu::Stream stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n, kThreads, kMaxBlocks), kThreads, 0, stream>>>(n, alpha, y);
  gpu::check_launch("scale_tensor");
}

}  // namespace crema::kernels::cuda
