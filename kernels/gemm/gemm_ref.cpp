// Reference GEMM: C[i,j] = alpha * sum_p op(A)[i,p] * op(B)[p,j] + beta * C[i,j], read straight
// off the definition. It is the oracle every fast path is tested against (in double).
#include "kernels/gemm/gemm.h"

namespace crema::kernels::ref {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  // op(A)[i,p] and op(B)[p,j] in row-major storage with leading dimensions.
  auto a = [&](int64_t i, int64_t p) { return trans_a ? A[p * lda + i] : A[i * lda + p]; };
  auto b = [&](int64_t p, int64_t j) { return trans_b ? B[j * ldb + p] : B[p * ldb + j]; };
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T sum = 0;
      if (alpha != T(0)) {
        for (int64_t p = 0; p < K; ++p) sum += a(i, p) * b(p, j);
      }
      T& c = C[i * ldc + j];
      // beta == 0: C is write-only, so a NaN already in C must not leak into the result.
      c = beta == T(0) ? alpha * sum : alpha * sum + beta * c;
    }
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace crema::kernels::ref
