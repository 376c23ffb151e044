// The arithmetic the tensor ops share between the reference, the CPU path and the CUDA kernels
// (CREMA_HOST_DEVICE): what each OpTensorOp computes, how each ReduceOp lifts, combines and
// finishes its elements, and the index plans that turn a flat output index into input offsets.
// Definitions: tensor_ops.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace crema::kernels {

enum class OpTensorOp { add, mul, min, max, sqrt, logical_not };
enum class ReduceOp { sum, mul, max, min, amax, avg, norm1, norm2, mul_no_zeros };

// The most axes a tensor op takes (cuDNN's CUDNN_DIM_MAX).
constexpr int kMaxTensorOpDims = 8;

// Offsets of a tensor's elements as an index walk: flat index f over `shape` (row-major) maps
// to sum_k i_k * stride[k]. Axes of extent 1 are dropped and mergeable neighbours merged when a
// plan is made, so a plan usually has one to three axes.
struct IndexMap {
  int ndim = 0;
  int64_t shape[kMaxTensorOpDims] = {};
  int64_t stride[kMaxTensorOpDims] = {};
};

CREMA_HOST_DEVICE inline int64_t offset_of(const IndexMap& m, int64_t flat) {
  int64_t offset = 0;
  for (int k = m.ndim - 1; k >= 0; --k) {
    offset += (flat % m.shape[k]) * m.stride[k];
    flat /= m.shape[k];
  }
  return offset;
}

// op-tensor: C's elements (contiguous) walked by `c`, with B's offset of each in `b` (stride 0
// on the axes B broadcasts). `c` and `b` share their shapes; the last axis is C's innermost.
struct BroadcastPlan {
  IndexMap b;
  int64_t count = 0;  // C's elements
};

// reduce-tensor: output o reads x at offset_of(kept, o) + offset_of(reduced, r), r < reduced_count,
// where r is also the flat index within the reduced axes that argmax/argmin report.
struct ReducePlan {
  IndexMap kept;
  IndexMap reduced;
  int64_t outputs = 0;
  int64_t reduced_count = 0;
};

// transform-strided: element f of one logical shape is read at offset_of(x, f) and written at
// offset_of(y, f); x and y share their shapes (axes ordered by y's strides, largest first, so
// that walking f walks y forward). The gather and scatter of strided tensors (kernels/api/).
struct StridedPlan {
  IndexMap x;
  IndexMap y;
  int64_t count = 0;
};

namespace detail {

template <class T>
CREMA_HOST_DEVICE inline T op_tensor_apply(OpTensorOp op, T a, T b) {
  switch (op) {
    case OpTensorOp::add:
      return a + b;
    case OpTensorOp::mul:
      return a * b;
    case OpTensorOp::min:
      return b < a ? b : a;
    case OpTensorOp::max:
      return b > a ? b : a;
    case OpTensorOp::sqrt:
      return std::sqrt(a);
    case OpTensorOp::logical_not:
      return T(1) - a;
  }
  return a;
}

CREMA_HOST_DEVICE inline bool op_tensor_unary(OpTensorOp op) {
  return op == OpTensorOp::sqrt || op == OpTensorOp::logical_not;
}

CREMA_HOST_DEVICE inline bool reduce_has_indices(ReduceOp op) {
  return op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
}

// A partial reduction: its value and, for max/min/amax, the flat reduced index that holds it.
template <class A>
struct Reduced {
  A value;
  int64_t index;
};

// The identity of each combine; its index loses every tie (INT64_MAX).
template <class A>
CREMA_HOST_DEVICE inline Reduced<A> reduce_identity(ReduceOp op) {
  constexpr int64_t kNoIndex = INT64_MAX;
  switch (op) {
    case ReduceOp::mul:
    case ReduceOp::mul_no_zeros:
      return {A(1), kNoIndex};
    case ReduceOp::max:
    case ReduceOp::amax:
      return {A(-HUGE_VAL), kNoIndex};
    case ReduceOp::min:
      return {A(HUGE_VAL), kNoIndex};
    default:
      return {A(0), kNoIndex};
  }
}

// What one element contributes: |x| for amax and norm1, x^2 for norm2, 1 for a zero in
// mul_no_zeros, x otherwise.
template <class A>
CREMA_HOST_DEVICE inline A reduce_lift(ReduceOp op, A x) {
  switch (op) {
    case ReduceOp::amax:
    case ReduceOp::norm1:
      return std::fabs(x);
    case ReduceOp::norm2:
      return x * x;
    case ReduceOp::mul_no_zeros:
      return x == A(0) ? A(1) : x;
    default:
      return x;
  }
}

// Combines two partials. For max/min/amax the better value wins and a tie goes to the smaller
// index, so any order of combining (a loop, a tree) reports the first occurrence.
template <class A>
CREMA_HOST_DEVICE inline Reduced<A> reduce_combine(ReduceOp op, Reduced<A> a, Reduced<A> b) {
  switch (op) {
    case ReduceOp::max:
    case ReduceOp::amax:
      return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
    case ReduceOp::min:
      return (b.value < a.value || (b.value == a.value && b.index < a.index)) ? b : a;
    case ReduceOp::mul:
    case ReduceOp::mul_no_zeros:
      return {a.value * b.value, 0};
    default:
      return {a.value + b.value, 0};
  }
}

// The reduction of `count` elements from its combined partial: the mean for avg, the square root
// for norm2.
template <class A>
CREMA_HOST_DEVICE inline A reduce_finish(ReduceOp op, A value, int64_t count) {
  if (op == ReduceOp::avg) return value / A(count);
  if (op == ReduceOp::norm2) return std::sqrt(value);
  return value;
}

// out = alpha * value + beta * out, with out not read when beta is 0 (it may hold NaN).
template <class T>
CREMA_HOST_DEVICE inline T blend(T alpha, T value, T beta, T out) {
  return beta == T(0) ? alpha * value : alpha * value + beta * out;
}

}  // namespace detail
}  // namespace crema::kernels
