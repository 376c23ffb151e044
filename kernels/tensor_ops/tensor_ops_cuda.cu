// Tensor ops, CUDA (reduce_tensor: tensor_ops_reduce_cuda.cu). The versions (tensor_ops.h):
//   op_tensor  elementwise: one thread per element of C (grid-stride), B's offset decoded from
//                the plan per element: two 64-bit divisions per plan axis and element;
//              row_vectors: C as rows of the plan's innermost axis, along which B's stride is 0
//                (one B value per row: a per-channel B [1, C, 1, 1] on NCHW) or 1 (a row of B;
//                a B of C's shape is one long row). T threads per row (32 to 256, the fewest
//                whose 4 items each cover it; short rows share a block), an item being a float4
//                where every row is 16-byte aligned, else a float; B's row offset decoded once
//                per row; each thread issues its 4 items' loads before it computes.
//   transform_tensor  index_map: one thread per element of y (writes coalesced, reads gathered);
//                     tiled: a batched transpose (NCHW <-> NHWC after the plan's merging) runs
//                       kernels/layout's 32 x 32 shared-memory tiles with the blend.
//   transform_strided: one thread per element, both offsets decoded from the plan (its axes
//       ordered by y's strides: a contiguous y is written coalesced).
//   set_tensor, scale_tensor: grid-stride maps.
// C may alias A (and B when not broadcast): every element is read and then written by one thread,
// so no pointer is __restrict__.
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/layout/layout.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::cuda {
namespace {

constexpr int64_t kMaxBlocks = 8192;

__global__ void op_tensor_kernel(OpTensorOp op, BroadcastPlan plan, float alpha1, const float* a,
                                 float alpha2, const float* b, float beta, float* c) {
  const bool unary = detail::op_tensor_unary(op);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < plan.count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float bv = unary ? 0.0f : alpha2 * b[offset_of(plan.b, i)];
    c[i] = detail::blend(1.0f, detail::op_tensor_apply(op, alpha1 * a[i], bv), beta, c[i]);
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

// ---- op_tensor, row_vectors ------------------------------------------------------------------

constexpr int kItemsPerThread = 4;
constexpr int64_t kMaxRowBlocks = 65535;  // grid.y

// C as `rows` rows of `inner` elements; row k's B elements start at offset_of(b_outer, k) and
// step by b_stride (0: one value per row; 1: a row of B).
// A block of kThreads serves 256 / row_threads rows side by side, row_threads (32 to 256, a
// power of two) threads each: short rows (7 x 7, 14 x 14 planes) do not idle most of a block.
struct RowPlan {
  IndexMap b_outer;
  int64_t rows;
  int64_t inner;
  int64_t b_stride;
  int row_threads;
};

RowPlan rows_of(const BroadcastPlan& plan) {
  RowPlan r{plan.b, 0, plan.b.shape[plan.b.ndim - 1], plan.b.stride[plan.b.ndim - 1], kThreads};
  r.b_outer.ndim = plan.b.ndim - 1;
  r.rows = r.inner > 0 ? plan.count / r.inner : 0;
  return r;
}

// The fewest threads (32 .. kThreads) whose kItemsPerThread items each cover `items`.
int row_threads_for(int64_t items) {
  int threads = 32;
  while (threads < kThreads && int64_t(threads) * kItemsPerThread < items) threads *= 2;
  return threads;
}

// V consecutive floats at p (one 16-byte access when V = 4).
template <int V>
__device__ inline void load(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    v[0] = *p;
  }
}

template <int V>
__device__ inline void store(float* p, const float (&v)[V]) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}

// Block (x, y): thread t is lane t % T of row y * (256 / T) + t / T (T = row_threads; then every
// gridDim.y * (256 / T) rows on) and takes items x * 4T + lane + j T (j < 4) of it, an item being
// V floats. The same arithmetic as op_tensor_kernel, element by element.
template <OpTensorOp kOp, int V>
__global__ void __launch_bounds__(kThreads, 4)
    op_tensor_rows(RowPlan plan, float alpha1, const float* a, float alpha2, const float* b,
                   float beta, float* c) {
  constexpr bool kUnary = kOp == OpTensorOp::sqrt || kOp == OpTensorOp::logical_not;
  const int64_t items = plan.inner / V;
  const int T = plan.row_threads, rows_per_block = kThreads / T;
  const int64_t first = int64_t(blockIdx.x) * T * kItemsPerThread + int(threadIdx.x) % T;
  for (int64_t row = int64_t(blockIdx.y) * rows_per_block + int(threadIdx.x) / T; row < plan.rows;
       row += int64_t(gridDim.y) * rows_per_block) {
    const int64_t base = row * plan.inner;
    const float* br = kUnary ? nullptr : b + offset_of(plan.b_outer, row);
    const float b_row = kUnary || plan.b_stride != 0 ? 0.0f : alpha2 * br[0];
    // A's and B's items in flight first; C's prior values (beta != 0, the rare case) item by item.
    float av[kItemsPerThread][V], bv[kItemsPerThread][V];
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
      const int64_t k = first + j * T;
      if (k >= items) continue;
      load<V>(a + base + k * V, av[j]);
      if (!kUnary && plan.b_stride != 0) load<V>(br + k * V, bv[j]);
    }
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
      const int64_t k = first + j * T;
      if (k >= items) continue;
      float prior[V] = {}, out[V];
      if (beta != 0.0f) load<V>(c + base + k * V, prior);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float bval = kUnary ? 0.0f : (plan.b_stride != 0 ? alpha2 * bv[j][e] : b_row);
        out[e] = detail::blend(1.0f, detail::op_tensor_apply(kOp, alpha1 * av[j][e], bval), beta,
                               prior[e]);
      }
      store<V>(c + base + k * V, out);
    }
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <OpTensorOp kOp>
void launch_rows(RowPlan r, float alpha1, const float* a, float alpha2, const float* b, float beta,
                 float* c, gpu::Stream stream) {
  const bool b_row = !detail::op_tensor_unary(kOp) && r.b_stride != 0;
  const bool vectors = r.inner % 4 == 0 && aligned16(a) && aligned16(c) && (!b_row || aligned16(b));
  const int64_t items = vectors ? r.inner / 4 : r.inner;
  r.row_threads = row_threads_for(items);
  const int64_t row_blocks = ceil_div(r.rows, kThreads / r.row_threads);
  const dim3 grid(unsigned(ceil_div(items, int64_t(r.row_threads) * kItemsPerThread)),
                  unsigned(row_blocks < kMaxRowBlocks ? row_blocks : kMaxRowBlocks));
  if (vectors) {
    op_tensor_rows<kOp, 4><<<grid, kThreads, 0, stream>>>(r, alpha1, a, alpha2, b, beta, c);
  } else {
    op_tensor_rows<kOp, 1><<<grid, kThreads, 0, stream>>>(r, alpha1, a, alpha2, b, beta, c);
  }
}

// ---- transform_tensor, tiled ----------------------------------------------------------------

// Whether y_to_x reads y[b, s, r] = x[b, r, s] (a batched transpose, B = 1 when the map has two
// axes), and its B, R, S.
bool batched_transpose_of(const IndexMap& m, int64_t& B, int64_t& R, int64_t& S) {
  if (m.ndim == 2 && m.stride[0] == 1 && m.stride[1] == m.shape[0]) {
    B = 1, S = m.shape[0], R = m.shape[1];
    return true;
  }
  if (m.ndim == 3 && m.stride[1] == 1 && m.stride[2] == m.shape[1] &&
      m.stride[0] == m.shape[1] * m.shape[2]) {
    B = m.shape[0], S = m.shape[1], R = m.shape[2];
    return true;
  }
  return false;
}

}  // namespace

void op_tensor(OpTensorOp op, const BroadcastPlan& plan, float alpha1, const float* a, float alpha2,
               const float* b, float beta, float* c, OpTensorVersion version, gpu::Stream stream) {
  if (plan.count == 0) return;
  const RowPlan rows = rows_of(plan);
  if (version == OpTensorVersion::row_vectors && rows.inner >= kMinRow) {
    switch (op) {
      case OpTensorOp::add:
        launch_rows<OpTensorOp::add>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
      case OpTensorOp::mul:
        launch_rows<OpTensorOp::mul>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
      case OpTensorOp::min:
        launch_rows<OpTensorOp::min>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
      case OpTensorOp::max:
        launch_rows<OpTensorOp::max>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
      case OpTensorOp::sqrt:
        launch_rows<OpTensorOp::sqrt>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
      case OpTensorOp::logical_not:
        launch_rows<OpTensorOp::logical_not>(rows, alpha1, a, alpha2, b, beta, c, stream);
        break;
    }
  } else {
    op_tensor_kernel<<<blocks_for(plan.count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        op, plan, alpha1, a, alpha2, b, beta, c);
  }
  gpu::check_launch("op_tensor");
}

void transform_tensor(const IndexMap& y_to_x, int64_t count, float alpha, const float* x,
                      float beta, float* y, TransformVersion version, gpu::Stream stream) {
  if (count == 0) return;
  int64_t B = 0, R = 0, S = 0;
  if (version == TransformVersion::tiled && batched_transpose_of(y_to_x, B, R, S)) {
    batched_transpose(B, R, S, alpha, x, beta, y, stream);
    return;
  }
  transform_kernel<<<blocks_for(count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
      y_to_x, count, alpha, x, beta, y);
  gpu::check_launch("transform_tensor");
}

void transform_strided(const StridedPlan& plan, float alpha, const float* x, float beta, float* y,
                       gpu::Stream stream) {
  if (plan.count == 0) return;
  strided_kernel<<<blocks_for(plan.count, kThreads, kMaxBlocks), kThreads, 0, stream>>>(plan, alpha,
                                                                                        x, beta, y);
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
