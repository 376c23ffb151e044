// Elementwise helpers, reference: the formulas of elementwise.h, one element at a time.
#include "kernels/elementwise/elementwise.h"

namespace crema::kernels::ref {

template <class T>
void fill(int64_t n, T value, T* x) {
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

template <class T>
void scale(int64_t n, T alpha, T* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

template <class T>
void axpy(int64_t n, T alpha, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <class T>
void axpby(int64_t n, T alpha, const T* x, T beta, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = beta == T(0) ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

template <class T>
void add(int64_t n, const T* a, const T* b, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
double sum(int64_t n, const T* x) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]);
  return s;
}

template <class T>
double sum_of_squares(int64_t n, const T* x) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

template <class T>
void add_bias_rows(int64_t M, int64_t N, const T* bias, T* y) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias[n];
  }
}

template <class T>
void accumulate_bias_rows(int64_t M, int64_t N, const T* dy, T* dbias) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) dbias[n] += dy[m * N + n];
  }
}

template void fill<float>(int64_t, float, float*);
template void scale<float>(int64_t, float, float*);
template void axpy<float>(int64_t, float, const float*, float*);
template void axpby<float>(int64_t, float, const float*, float, float*);
template void add<float>(int64_t, const float*, const float*, float*);
template double sum<float>(int64_t, const float*);
template double sum_of_squares<float>(int64_t, const float*);
template void add_bias_rows<float>(int64_t, int64_t, const float*, float*);
template void accumulate_bias_rows<float>(int64_t, int64_t, const float*, float*);
template void fill<double>(int64_t, double, double*);
template void scale<double>(int64_t, double, double*);
template void axpy<double>(int64_t, double, const double*, double*);
template void axpby<double>(int64_t, double, const double*, double, double*);
template void add<double>(int64_t, const double*, const double*, double*);
template double sum<double>(int64_t, const double*);
template double sum_of_squares<double>(int64_t, const double*);
template void add_bias_rows<double>(int64_t, int64_t, const double*, double*);
template void accumulate_bias_rows<double>(int64_t, int64_t, const double*, double*);

}  // namespace crema::kernels::ref
