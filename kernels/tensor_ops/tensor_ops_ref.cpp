// Tensor ops, reference: every tensor walked by its multi-index, each output computed straight
// from the definitions in tensor_ops.h. The oracle of the tests; the f64 path of the dispatch.
#include <vector>

#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::ref {
namespace {

// Row-major flat index of `index` in `shape`.
int64_t flat_of(int ndim, const int64_t* shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (int k = 0; k < ndim; ++k) flat = flat * shape[k] + index[size_t(k)];
  return flat;
}

// Advances `index` over `shape` (row-major); false after the last element.
bool next_index(int ndim, const int64_t* shape, std::vector<int64_t>& index) {
  for (int k = ndim - 1; k >= 0; --k) {
    if (++index[size_t(k)] < shape[k]) return true;
    index[size_t(k)] = 0;
  }
  return false;
}

int64_t numel_of(int ndim, const int64_t* shape) {
  int64_t n = 1;
  for (int k = 0; k < ndim; ++k) n *= shape[k];
  return n;
}

}  // namespace

template <class T>
void op_tensor(OpTensorOp op, int ndim, const int64_t* c_shape, const int64_t* b_shape, T alpha1,
               const T* a, T alpha2, const T* b, T beta, T* c) {
  if (numel_of(ndim, c_shape) == 0) return;
  std::vector<int64_t> i(size_t(ndim), 0), j(size_t(ndim), 0);
  do {
    for (int k = 0; k < ndim; ++k)
      j[size_t(k)] = b_shape == nullptr || b_shape[k] == 1 ? 0 : i[size_t(k)];
    const int64_t ci = flat_of(ndim, c_shape, i);
    const T bv = detail::op_tensor_unary(op) ? T(0) : alpha2 * b[flat_of(ndim, b_shape, j)];
    c[ci] = detail::blend(T(1), detail::op_tensor_apply(op, alpha1 * a[ci], bv), beta, c[ci]);
  } while (next_index(ndim, c_shape, i));
}

template <class T>
void reduce_tensor(ReduceOp op, int ndim, const int64_t* x_shape, const int64_t* y_shape, T alpha,
                   const T* x, T beta, T* y, T* indices) {
  // The reduced axes are those where y's extent is 1 and x's is not (an extent-1 axis of x is
  // reduced or kept alike).
  std::vector<int64_t> r_shape(static_cast<size_t>(ndim));
  for (int k = 0; k < ndim; ++k) r_shape[size_t(k)] = y_shape[k] == x_shape[k] ? 1 : x_shape[k];
  const int64_t outputs = numel_of(ndim, y_shape), count = numel_of(ndim, r_shape.data());
  std::vector<detail::Reduced<T>> acc(size_t(outputs), detail::reduce_identity<T>(op));
  if (numel_of(ndim, x_shape) > 0) {
    std::vector<int64_t> i(size_t(ndim), 0), yi(static_cast<size_t>(ndim)),
        ri(static_cast<size_t>(ndim));
    int64_t xi = 0;
    do {
      for (int k = 0; k < ndim; ++k) {
        const bool reduced = y_shape[k] != x_shape[k];
        yi[size_t(k)] = reduced ? 0 : i[size_t(k)];
        ri[size_t(k)] = reduced ? i[size_t(k)] : 0;
      }
      detail::Reduced<T>& a = acc[size_t(flat_of(ndim, y_shape, yi))];
      a = detail::reduce_combine(
          op, a, {detail::reduce_lift(op, x[xi++]), flat_of(ndim, r_shape.data(), ri)});
    } while (next_index(ndim, x_shape, i));
  }
  for (int64_t o = 0; o < outputs; ++o) {
    y[o] = detail::blend(alpha, detail::reduce_finish(op, acc[size_t(o)].value, count), beta, y[o]);
    if (indices != nullptr) indices[o] = T(count == 0 ? 0 : acc[size_t(o)].index);
  }
}

template <class Tx, class Ty>
void transform_tensor(int ndim, const int64_t* x_shape, const int* order, Ty alpha, const Tx* x,
                      Ty beta, Ty* y) {
  std::vector<int64_t> y_shape(static_cast<size_t>(ndim));
  for (int k = 0; k < ndim; ++k) y_shape[size_t(k)] = x_shape[order[k]];
  if (numel_of(ndim, x_shape) == 0) return;
  std::vector<int64_t> i(size_t(ndim), 0), j(static_cast<size_t>(ndim));
  int64_t yi = 0;
  do {
    for (int k = 0; k < ndim; ++k) j[size_t(order[k])] = i[size_t(k)];
    y[yi] = detail::blend(alpha, Ty(x[flat_of(ndim, x_shape, j)]), beta, y[yi]);
    ++yi;
  } while (next_index(ndim, y_shape.data(), i));
}

template <class T>
void transform_strided(int ndim, const int64_t* shape, const int64_t* x_stride,
                       const int64_t* y_stride, T alpha, const T* x, T beta, T* y) {
  if (numel_of(ndim, shape) == 0) return;
  std::vector<int64_t> i(size_t(ndim), 0);
  do {
    int64_t xo = 0, yo = 0;
    for (int k = 0; k < ndim; ++k) {
      xo += i[size_t(k)] * x_stride[k];
      yo += i[size_t(k)] * y_stride[k];
    }
    y[yo] = detail::blend(alpha, x[xo], beta, y[yo]);
  } while (next_index(ndim, shape, i));
}

template <class T>
void set_tensor(int64_t n, T value, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

template <class T>
void scale_tensor(int64_t n, T alpha, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * y[i];
}

#define CREMA_TENSOR_OPS_INSTANTIATE(T)                                                         \
  template void op_tensor<T>(OpTensorOp, int, const int64_t*, const int64_t*, T, const T*, T,   \
                             const T*, T, T*);                                                  \
  template void reduce_tensor<T>(ReduceOp, int, const int64_t*, const int64_t*, T, const T*, T, \
                                 T*, T*);                                                       \
  template void transform_strided<T>(int, const int64_t*, const int64_t*, const int64_t*, T,    \
                                     const T*, T, T*);                                          \
  template void set_tensor<T>(int64_t, T, T*);                                                  \
  template void scale_tensor<T>(int64_t, T, T*);
CREMA_TENSOR_OPS_INSTANTIATE(float)
CREMA_TENSOR_OPS_INSTANTIATE(double)
#undef CREMA_TENSOR_OPS_INSTANTIATE

template void transform_tensor<float, float>(int, const int64_t*, const int*, float, const float*,
                                             float, float*);
template void transform_tensor<float, double>(int, const int64_t*, const int*, double, const float*,
                                              double, double*);
template void transform_tensor<double, float>(int, const int64_t*, const int*, float, const double*,
                                              float, float*);
template void transform_tensor<double, double>(int, const int64_t*, const int*, double,
                                               const double*, double, double*);

}  // namespace crema::kernels::ref
