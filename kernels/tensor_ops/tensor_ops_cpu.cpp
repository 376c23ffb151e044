// Tensor ops, CPU: OpenMP over independent outputs, the innermost axis of each plan walked as a
// plain strided loop (unit or zero stride after merging: the compiler vectorizes it). Every output
// is computed by one thread in a fixed order, so results do not depend on the thread count.
#include <algorithm>

#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 13;

// The plan without its innermost axis: rows of length `inner` with stride `inner_stride`.
struct Rows {
  IndexMap outer;
  int64_t inner;
  int64_t inner_stride;
};

Rows rows_of(const IndexMap& m) {
  Rows r{m, m.shape[m.ndim - 1], m.stride[m.ndim - 1]};
  r.outer.ndim = m.ndim - 1;
  return r;
}

int64_t row_count(const Rows& r) {
  int64_t n = 1;
  for (int k = 0; k < r.outer.ndim; ++k) n *= r.outer.shape[k];
  return n;
}

}  // namespace

void op_tensor(OpTensorOp op, const BroadcastPlan& plan, float alpha1, const float* a, float alpha2,
               const float* b, float beta, float* c, int num_threads) {
  const Rows rows = rows_of(plan.b);
  const int64_t count = row_count(rows), n = rows.inner, bs = rows.inner_stride;
  const bool unary = detail::op_tensor_unary(op);
  const bool parallel = plan.count >= kParallelElements;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel)
  for (int64_t row = 0; row < count; ++row) {
    const float* ar = a + row * n;
    const float* br = unary ? nullptr : b + offset_of(rows.outer, row);
    float* cr = c + row * n;
    for (int64_t j = 0; j < n; ++j) {
      const float bv = unary ? 0.0f : alpha2 * br[j * bs];
      cr[j] = detail::blend(1.0f, detail::op_tensor_apply(op, alpha1 * ar[j], bv), beta, cr[j]);
    }
  }
}

void reduce_tensor(ReduceOp op, const ReducePlan& plan, float alpha, const float* x, float beta,
                   float* y, float* indices, int num_threads) {
  const Rows rows = rows_of(plan.reduced);
  const int64_t row_total = row_count(rows), n = rows.inner, xs = rows.inner_stride;
  const bool parallel = plan.outputs * plan.reduced_count >= kParallelElements;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel)
  for (int64_t o = 0; o < plan.outputs; ++o) {
    const float* xo = x + offset_of(plan.kept, o);
    detail::Reduced<double> acc = detail::reduce_identity<double>(op);
    for (int64_t row = 0; row < row_total; ++row) {
      const float* xr = xo + offset_of(rows.outer, row);
      for (int64_t j = 0; j < n; ++j) {
        acc = detail::reduce_combine<double>(
            op, acc, {detail::reduce_lift<double>(op, xr[j * xs]), row * n + j});
      }
    }
    const double value = detail::reduce_finish(op, acc.value, plan.reduced_count);
    y[o] = detail::blend(alpha, float(value), beta, y[o]);
    if (indices != nullptr) indices[o] = float(plan.reduced_count == 0 ? 0 : acc.index);
  }
}

void transform_tensor(const IndexMap& y_to_x, float alpha, const float* x, float beta, float* y,
                      int num_threads) {
  const Rows rows = rows_of(y_to_x);
  const int64_t count = row_count(rows), n = rows.inner, xs = rows.inner_stride;
  const bool parallel = count * n >= kParallelElements;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel)
  for (int64_t row = 0; row < count; ++row) {
    const float* xr = x + offset_of(rows.outer, row);
    float* yr = y + row * n;
    for (int64_t j = 0; j < n; ++j) yr[j] = detail::blend(alpha, xr[j * xs], beta, yr[j]);
  }
}

void transform_strided(const StridedPlan& plan, float alpha, const float* x, float beta, float* y,
                       int num_threads) {
  const Rows xrows = rows_of(plan.x), yrows = rows_of(plan.y);
  const int64_t count = row_count(yrows), n = yrows.inner;
  const int64_t xs = xrows.inner_stride, ys = yrows.inner_stride;
  const bool parallel = plan.count >= kParallelElements;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (parallel)
  for (int64_t row = 0; row < count; ++row) {
    const float* xr = x + offset_of(xrows.outer, row);
    float* yr = y + offset_of(yrows.outer, row);
    for (int64_t j = 0; j < n; ++j) yr[j * ys] = detail::blend(alpha, xr[j * xs], beta, yr[j * ys]);
  }
}

void set_tensor(int64_t n, float value, float* y, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void scale_tensor(int64_t n, float alpha, float* y, int num_threads) {
#pragma omp parallel for num_threads(num_threads) schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * y[i];
}

}  // namespace crema::kernels::cpu
