// The Tensor-level GEMM: checks the tensors once, then dispatches (kernels/common/dispatch.h) to
// cuda::sgemm with the version cuda::best_version picks for the shape and its workspace from
// ctx.workspace(), to cpu::sgemm, or, for f64 tensors on the CPU, to ref::gemm<double>; 16-bit
// operands to cuda::gemm_16bit, or on the CPU to the reference in double (gemm_16bit_reference).
#include "kernels/gemm/gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/build_config.h"
#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/elementwise/elementwise.h"

namespace crema::kernels {
namespace {

// Matrices only: their extents name M, N and K.
void check_matrix(const char* name, const Tensor& t) {
  if (!t.defined() || t.ndim() != 2) {
    throw Error(std::string("gemm: ") + name + " must be 2-D, got " +
                (t.defined() ? t.description() : std::string("an undefined tensor")));
  }
}

bool is_16bit(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

// A 16-bit element as a double, and a double rounded once into 16 bits (through float: the
// double is the exact sum's nearest, and float keeps 24 bits, far more than the 8 or 11 kept).
double widened(const Tensor& t, int64_t i) {
  return t.dtype() == DType::bf16 ? double(to_f32(t.data<bf16_t>()[i]))
                                  : double(to_f32(t.data<f16_t>()[i]));
}
double c_value(const Tensor& c, int64_t i) {
  return c.dtype() == DType::f32 ? double(c.data<float>()[i]) : widened(c, i);
}
void store_c(Tensor& c, int64_t i, double v) {
  if (c.dtype() == DType::f32) {
    c.data<float>()[i] = float(v);
  } else if (c.dtype() == DType::bf16) {
    c.data<bf16_t>()[i] = to_bf16(float(v));
  } else {
    c.data<f16_t>()[i] = to_f16(float(v));
  }
}

// The CPU's 16-bit GEMM, a reference for the tests: the operands widened (exactly) to double,
// ref::gemm<double>, then alpha, the bias and beta C in double and one rounding into c.
void gemm_16bit_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                          const Tensor& a, const Tensor& b, float beta, Tensor& c,
                          const Tensor* bias) {
  std::vector<double> a64(size_t(a.numel())), b64(size_t(b.numel())), p(size_t(M * N));
  for (int64_t i = 0; i < a.numel(); ++i) a64[size_t(i)] = widened(a, i);
  for (int64_t i = 0; i < b.numel(); ++i) b64[size_t(i)] = widened(b, i);
  ref::gemm<double>(trans_a, trans_b, M, N, K, 1.0, a64.data(), std::max<int64_t>(1, a.dim(1)),
                    b64.data(), std::max<int64_t>(1, b.dim(1)), 0.0, p.data(),
                    std::max<int64_t>(1, N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = m * N + n;
      double v = double(alpha) * p[size_t(i)];
      if (bias != nullptr) v += double(bias->data<float>()[n]);
      if (beta != 0.0f) v += double(beta) * c_value(c, i);
      store_c(c, i, v);
    }
  }
}

// gemm_workspace_bytes on CUDA: a template, so that a build without CUDA -- where the cuda::
// queries do not exist -- never instantiates the branch that calls them.
template <bool with_cuda>
size_t cuda_gemm_workspace_bytes(const Device& device, bool trans_a, bool trans_b, int64_t M,
                                 int64_t N, int64_t K, DType operands, cuda::GemmMath math) {
  if constexpr (with_cuda) {
    // A GPU this host lacks (crema summary --device cuda:0 without one): its SM count and compute
    // capability, which the plans depend on, are unknown; nothing is counted.
    if (device.index >= gpu::device_count()) return 0;
    const gpu::DeviceGuard guard(device.index);
    if (is_16bit(operands)) {
      return cuda::gemm_16bit_workspace(trans_a, trans_b, M, N, K,
                                        cuda::best_16bit_version(operands)) *
             sizeof(float);
    }
    if (operands != DType::f32) return 0;
    const cuda::GemmVersion version = cuda::best_version(math, M, N, K);
    return cuda::sgemm_workspace(trans_a, trans_b, M, N, K, version, math) * sizeof(float);
  } else {
    return 0;
  }
}

}  // namespace

void gemm(Context& ctx, bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c, cuda::GemmMath math, const Tensor* bias) {
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
  // a and b in one dtype, c in it too (or f32 for 16-bit operands), on the context's device.
  const DType c_dtype = is_16bit(a.dtype()) && c.dtype() == DType::f32 ? DType::f32 : a.dtype();
  check_tensor(ctx, "gemm", "a", a, a.shape(), a.dtype());
  check_tensor(ctx, "gemm", "b", b, b.shape(), a.dtype());
  check_tensor(ctx, "gemm", "c", c, c.shape(), c_dtype);
  if (bias != nullptr) {
    check_tensor(ctx, "gemm", "bias", *bias, {N}, is_16bit(a.dtype()) ? DType::f32 : a.dtype());
  }
  // Contiguous rows; an empty matrix still gets a leading dimension of at least 1, as in BLAS.
  const int64_t lda = std::max<int64_t>(1, a.dim(1));
  const int64_t ldb = std::max<int64_t>(1, b.dim(1));
  const int64_t ldc = std::max<int64_t>(1, c.dim(1));
  const auto gemm_16bit_cuda = [&](auto stream) {
    const cuda::GemmVersion version = cuda::best_16bit_version(a.dtype());
    const size_t floats = cuda::gemm_16bit_workspace(trans_a, trans_b, M, N, K, version);
    cuda::gemm_16bit(a.dtype(), c.dtype(), trans_a, trans_b, M, N, K, alpha, a.raw(), lda, b.raw(),
                     ldb, beta, c.raw(), ldc, bias != nullptr ? bias->data<float>() : nullptr,
                     stream, version, floats > 0 ? ctx.workspace(floats) : nullptr);
  };
  const auto gemm_16bit_cpu = [&] {
    gemm_16bit_reference(trans_a, trans_b, M, N, K, alpha, a, b, beta, c, bias);
  };
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
           on_cuda(DType::bf16, gemm_16bit_cuda), on_cuda(DType::f16, gemm_16bit_cuda),
           on_cpu(DType::f32,
                  [&] {
                    cpu::sgemm(trans_a, trans_b, M, N, K, alpha, a.data<float>(), lda,
                               b.data<float>(), ldb, beta, c.data<float>(), ldc, ctx.num_threads());
                  }),
           on_cpu(DType::f64,
                  [&] {
                    ref::gemm<double>(trans_a, trans_b, M, N, K, alpha, a.data<double>(), lda,
                                      b.data<double>(), ldb, beta, c.data<double>(), ldc);
                  }),
           on_cpu(DType::bf16, gemm_16bit_cpu), on_cpu(DType::f16, gemm_16bit_cpu));
  // f32 and f64: the bias after the product (the 16-bit paths add it in their store).
  if (bias != nullptr && !is_16bit(a.dtype())) add_bias_rows(ctx, *bias, c);
}

size_t gemm_workspace_bytes(const Device& device, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, DType operands, cuda::GemmMath math) {
  if (!device.is_cuda()) return 0;
  return cuda_gemm_workspace_bytes<kBuiltWithCuda>(device, trans_a, trans_b, M, N, K, operands,
                                                   math);
}

}  // namespace crema::kernels
