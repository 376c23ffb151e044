// The one dispatch point of GEMM: checks the tensors once, then calls the implementation for the
// context's device (cpu::sgemm or, behind CREMA_WITH_CUDA and nowhere else, cuda::sgemm with the
// version cuda::best_version picks for the shape and its workspace from ctx.workspace()).
#include "kernels/gemm/gemm.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace crema::kernels {
namespace {

void check_operand(const Context& ctx, const char* name, const Tensor& t) {
  if (!t.defined()) throw Error(std::string("gemm: tensor ") + name + " is undefined");
  if (t.ndim() != 2) {
    throw Error(std::string("gemm: ") + name + " must be 2-D, got " + t.description());
  }
  if (t.dtype() != DType::f32) {
    throw Error(std::string("gemm: ") + name + " must be f32, got " + t.description());
  }
  if (t.device() != ctx.device()) {
    throw Error(std::string("gemm: ") + name + " is " + t.description() +
                " but the context runs on " + ctx.device().str());
  }
}

}  // namespace

void gemm(Context& ctx, bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c, cuda::GemmMath math) {
  check_operand(ctx, "a", a);
  check_operand(ctx, "b", b);
  check_operand(ctx, "c", c);
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
  // Contiguous rows; an empty matrix still gets a leading dimension of at least 1, as in BLAS.
  const int64_t lda = std::max<int64_t>(1, a.dim(1));
  const int64_t ldb = std::max<int64_t>(1, b.dim(1));
  const int64_t ldc = std::max<int64_t>(1, c.dim(1));
  if (ctx.device().is_cpu()) {
    cpu::sgemm(trans_a, trans_b, M, N, K, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta,
               c.data<float>(), ldc, ctx.num_threads());
    return;
  }
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const cuda::GemmVersion version = cuda::best_version(math, M, N, K);
    const size_t floats = cuda::sgemm_workspace(trans_a, trans_b, M, N, K, version, math);
    cuda::sgemm(trans_a, trans_b, M, N, K, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta,
                c.data<float>(), ldc, ctx.stream(), version, math,
                floats > 0 ? ctx.workspace(floats) : nullptr);
    return;
  }
#endif
  throw Error("gemm: no implementation for tensors on " + ctx.device().str() + " yet");
}

}  // namespace crema::kernels
