// ReLU, reference: the formulas of relu.h, one element at a time.
#include "kernels/activations/relu.h"

namespace crema::kernels::ref {

template <class T>
void relu_forward(int64_t n, const T* x, T* y, T negative_slope) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : negative_slope * x[i];
}

template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx, T negative_slope) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : negative_slope * dy[i];
}

template void relu_forward<float>(int64_t, const float*, float*, float);
template void relu_forward<double>(int64_t, const double*, double*, double);
template void relu_backward<float>(int64_t, const float*, const float*, float*, float);
template void relu_backward<double>(int64_t, const double*, const double*, double*, double);

}  // namespace crema::kernels::ref
