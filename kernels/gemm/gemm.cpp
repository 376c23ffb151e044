// The Tensor-level GEMM: checks the tensors once, then dispatches (kernels/common/dispatch.h) to
// cuda::sgemm with the version cuda::best_version picks for the shape and its workspace from
// ctx.workspace(), to cpu::sgemm, or, for f64 tensors on the CPU, to ref::gemm<double>.
#include "kernels/gemm/gemm.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// Matrices only: their extents name M, N and K.
void check_matrix(const char* name, const Tensor& t) {
  if (!t.defined() || t.ndim() != 2) {
    throw Error(std::string("gemm: ") + name + " must be 2-D, got " +
                (t.defined() ? t.description() : std::string("an undefined tensor")));
  }
}

}  // namespace

void gemm(Context& ctx, bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c, cuda::GemmMath math) {
  check_matrix("a", a);
  check_matrix("b", b);
  check_matrix("c", c);
  // a is [M, K] (or [K, M]), b is [K, N] (or [N, K]), c is [M, N].
  const int64_t M = trans_a ? a.dim(1) : a.dim(0);
  const int64_t K = trans_a ? a.dim(0) : a.dim(1);
  const int64_t Kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t N = trans_b ? b.dim(0) : b.dim(1);
  if (K != Kb || c.dim(0) != M || c.dim(1) != N) {
    // e.g. "gemm: shapes do not fit: a^T [500, 64] times b [30, 7] into c [64, 7] (op(a) is
    // [64, 500], op(b) is [30, 7]: the K extents differ)"
    const std::string op_a = shape_str({M, K}), op_b = shape_str({Kb, N});
    throw Error(std::string("gemm: shapes do not fit: ") + (trans_a ? "a^T " : "a ") +
                shape_str(a.shape()) + (trans_b ? " times b^T " : " times b ") +
                shape_str(b.shape()) + " into c " + shape_str(c.shape()) + " (op(a) is " + op_a +
                ", op(b) is " + op_b +
                (K != Kb ? ": the K extents differ)" : ": c must be " + shape_str({M, N}) + ")"));
  }
  // Every operand in a's dtype, on the context's device.
  check_tensor(ctx, "gemm", "a", a, a.shape(), a.dtype());
  check_tensor(ctx, "gemm", "b", b, b.shape(), a.dtype());
  check_tensor(ctx, "gemm", "c", c, c.shape(), a.dtype());
  // Contiguous rows; an empty matrix still gets a leading dimension of at least 1, as in BLAS.
  const int64_t lda = std::max<int64_t>(1, a.dim(1));
  const int64_t ldb = std::max<int64_t>(1, b.dim(1));
  const int64_t ldc = std::max<int64_t>(1, c.dim(1));
  dispatch(ctx, "gemm", a.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const cuda::GemmVersion version = cuda::best_version(math, M, N, K);
                     const size_t floats =
                         cuda::sgemm_workspace(trans_a, trans_b, M, N, K, version, math);
                     cuda::sgemm(trans_a, trans_b, M, N, K, alpha, a.data<float>(), lda,
                                 b.data<float>(), ldb, beta, c.data<float>(), ldc, stream, version,
                                 math, floats > 0 ? ctx.workspace(floats) : nullptr);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::sgemm(trans_a, trans_b, M, N, K, alpha, a.data<float>(), lda,
                               b.data<float>(), ldb, beta, c.data<float>(), ldc, ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::gemm<double>(trans_a, trans_b, M, N, K, alpha, a.data<double>(), lda,
                               b.data<double>(), ldb, beta, c.data<double>(), ldc);
           }));
}

}  // namespace crema::kernels
