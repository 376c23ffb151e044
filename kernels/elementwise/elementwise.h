// Elementwise helpers (BLAS level 1 and the bias broadcasts) that layers and solvers need.
//
//   fill:                  x = value
//   scale:                 x = alpha * x              (alpha = 0 keeps NaN as NaN; use fill)
//   axpy:                  y = alpha * x + y
//   axpby:                 y = alpha * x + beta * y   (beta = 0: y is not read, as in BLAS)
//   add:                   out = a + b                (out may alias a or b)
//   sum:                   out = sum_i x[i]           accumulated in double, out one element
//   sum_of_squares:        out = sum_i x[i]^2         accumulated in double, out one element
//   add_bias_rows:         y[m, n] += bias[n]         y viewed as [M, N], bias [N]
//   accumulate_bias_rows:  dbias[n] += sum_m dy[m, n] dy viewed as [M, N], dbias [N]
//
// The sums are deterministic: the CPU path adds fixed-size blocks in a fixed order, the CUDA path
// fixed block partials in a fixed tree, so the result depends neither on the thread count nor on
// the run (solvers use them for gradient norms and logs, which must be reproducible). At the
// Tensor level they write a one-element tensor on the context's device rather than return a
// number: a GPU training step never waits for the host, so it can be captured as a CUDA graph.
// Tensors given together have one shape, except for the bias helpers, where y's (dy's) last
// extent is N.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// Plain loops over n (or M x N) elements; the oracle of the tests. The sums accumulate in double,
// the rest in T. Explicitly instantiated for float and double.
template <class T>
void fill(int64_t n, T value, T* x);
template <class T>
void scale(int64_t n, T alpha, T* x);
template <class T>
void axpy(int64_t n, T alpha, const T* x, T* y);
template <class T>
void axpby(int64_t n, T alpha, const T* x, T beta, T* y);
template <class T>
void add(int64_t n, const T* a, const T* b, T* out);
template <class T>
double sum(int64_t n, const T* x);
template <class T>
double sum_of_squares(int64_t n, const T* x);
template <class T>
void add_bias_rows(int64_t M, int64_t N, const T* bias, T* y);
template <class T>
void accumulate_bias_rows(int64_t M, int64_t N, const T* dy, T* dbias);
}  // namespace ref

namespace cpu {
// The same, vectorized, on up to `num_threads` OpenMP threads for large inputs.
void fill(int64_t n, float value, float* x, int num_threads);
void scale(int64_t n, float alpha, float* x, int num_threads);
void axpy(int64_t n, float alpha, const float* x, float* y, int num_threads);
void axpby(int64_t n, float alpha, const float* x, float beta, float* y, int num_threads);
void add(int64_t n, const float* a, const float* b, float* out, int num_threads);
double sum(int64_t n, const float* x, int num_threads);
double sum_of_squares(int64_t n, const float* x, int num_threads);
void add_bias_rows(int64_t M, int64_t N, const float* bias, float* y, int num_threads);
void accumulate_bias_rows(int64_t M, int64_t N, const float* dy, float* dbias, int num_threads);
}  // namespace cpu

namespace cuda {
// The maps (fill, scale, axpy, axpby, add): one element per thread, or 16 bytes (4 floats, 8 bf16
// or f16) through vector accesses (falling back to one where a pointer is not 16-byte aligned).
// They are templates on the storage type T (float, bf16_t, f16_t): float arithmetic, the output
// rounded once. See README.md.
enum class MapVersion { scalar, vectorized, best = vectorized };
// accumulate_bias_rows: one thread per column adding the rows in order (the CPU's order and bits),
// or a block of 32 columns x 8 row groups whose group sums are added in a fixed tree.
enum class BiasVersion { column_serial, row_groups, best = row_groups };

template <class T>
void fill(int64_t n, float value, T* x, MapVersion version, gpu::Stream stream);
template <class T>
void scale(int64_t n, float alpha, T* x, MapVersion version, gpu::Stream stream);
template <class T>
void axpy(int64_t n, float alpha, const T* x, T* y, MapVersion version, gpu::Stream stream);
template <class T>
void axpby(int64_t n, float alpha, const T* x, float beta, T* y, MapVersion version,
           gpu::Stream stream);
template <class T>
void add(int64_t n, const T* a, const T* b, T* out, MapVersion version, gpu::Stream stream);
// out[0] = float(the sum in double). `workspace` holds sum_workspace_bytes(n) bytes of device
// memory (none for small n).
size_t sum_workspace_bytes(int64_t n);
void sum(int64_t n, const float* x, float* out, void* workspace, gpu::Stream stream);
void sum_of_squares(int64_t n, const float* x, float* out, void* workspace, gpu::Stream stream);
void add_bias_rows(int64_t M, int64_t N, const float* bias, float* y, gpu::Stream stream);
void accumulate_bias_rows(int64_t M, int64_t N, const float* dy, float* dbias, BiasVersion version,
                          gpu::Stream stream);
// dbias (fp32) += the column sums of a 16-bit dy (T: bf16_t or f16_t), fp32 sums; `workspace`
// holds accumulate_bias_rows_workspace(M, N) floats (row chunks' sums, added in chunk order).
template <class T>
void accumulate_bias_rows_16bit(int64_t M, int64_t N, const T* dy, float* dbias, float* workspace,
                                gpu::Stream stream);
size_t accumulate_bias_rows_workspace(int64_t M, int64_t N);
}  // namespace cuda

// Tensor level: float32 tensors on the context's device, or float64 on the CPU (the reference);
// the maps (fill, scale, axpy, axpby, add) also bf16 and f16 on CUDA;
// throws crema::Error naming the tensors when their shapes, dtypes or devices do not fit.
void fill(Context& ctx, Tensor& x, float value);
void scale(Context& ctx, float alpha, Tensor& x);
void axpy(Context& ctx, float alpha, const Tensor& x, Tensor& y);
void axpby(Context& ctx, float alpha, const Tensor& x, float beta, Tensor& y);
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);
// out: a tensor of x's dtype with one element (any shape), on the context's device.
void sum(Context& ctx, const Tensor& x, Tensor& out);
void sum_of_squares(Context& ctx, const Tensor& x, Tensor& out);
// y [..., N] (viewed as [M, N]), bias with N elements.
void add_bias_rows(Context& ctx, const Tensor& bias, Tensor& y);
// dy [..., N] (viewed as [M, N]), dbias with N elements; dy may also be bf16 or f16 with an f32
// dbias (a 16-bit layer's bias gradient: fp32 sums; on CUDA through ctx.workspace()).
void accumulate_bias_rows(Context& ctx, const Tensor& dy, Tensor& dbias);
// The bytes of the context's workspace accumulate_bias_rows takes on `device` for a `dy_dtype` dy
// of M x N (0 but for 16-bit dy on CUDA).
size_t accumulate_bias_rows_workspace_bytes(const Device& device, int64_t M, int64_t N,
                                            DType dy_dtype);

}  // namespace crema::kernels
