// Eltwise, reference: the definitions of eltwise.h, one element at a time.
#include "kernels/elementwise/eltwise.h"

namespace crema::kernels::ref {

template <class T>
void eltwise_sum(int64_t n, int K, const T* const* x, const T* coeff, T* y) {
  for (int64_t e = 0; e < n; ++e) {
    T acc = 0;
    for (int j = 0; j < K; ++j) acc += coeff[j] * x[j][e];
    y[e] = acc;
  }
}

template <class T>
void eltwise_prod(int64_t n, int K, const T* const* x, T* y) {
  for (int64_t e = 0; e < n; ++e) {
    T acc = 1;
    for (int j = 0; j < K; ++j) acc *= x[j][e];
    y[e] = acc;
  }
}

template <class T>
void eltwise_prod_backward(int64_t n, int K, const T* const* x, int i, const T* dy, T* dx) {
  for (int64_t e = 0; e < n; ++e) {
    T acc = dy[e];
    for (int j = 0; j < K; ++j) {
      if (j != i) acc *= x[j][e];
    }
    dx[e] = acc;
  }
}

template <class T>
void eltwise_max(int64_t n, int K, const T* const* x, T* y, T* argmax) {
  for (int64_t e = 0; e < n; ++e) {
    T best = x[0][e];
    int arg = 0;
    for (int j = 1; j < K; ++j) {
      const T v = x[j][e];
      if (v > best || (v != v && best == best)) {
        best = v;
        arg = j;
      }
    }
    y[e] = best;
    argmax[e] = T(arg);
  }
}

template <class T>
void eltwise_max_backward(int64_t n, int i, const T* dy, const T* argmax, T* dx) {
  for (int64_t e = 0; e < n; ++e) dx[e] = argmax[e] == T(i) ? dy[e] : T(0);
}

template void eltwise_sum<float>(int64_t, int, const float* const*, const float*, float*);
template void eltwise_sum<double>(int64_t, int, const double* const*, const double*, double*);
template void eltwise_prod<float>(int64_t, int, const float* const*, float*);
template void eltwise_prod<double>(int64_t, int, const double* const*, double*);
template void eltwise_prod_backward<float>(int64_t, int, const float* const*, int, const float*,
                                           float*);
template void eltwise_prod_backward<double>(int64_t, int, const double* const*, int, const double*,
                                            double*);
template void eltwise_max<float>(int64_t, int, const float* const*, float*, float*);
template void eltwise_max<double>(int64_t, int, const double* const*, double*, double*);
template void eltwise_max_backward<float>(int64_t, int, const float*, const float*, float*);
template void eltwise_max_backward<double>(int64_t, int, const double*, const double*, double*);

}  // namespace crema::kernels::ref
