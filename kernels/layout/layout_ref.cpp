// Layout transforms, reference: the definitions of layout.h, one element at a time.
#include <vector>

#include "kernels/layout/layout.h"

namespace crema::kernels::ref {

template <class T>
void batched_transpose(int64_t B, int64_t R, int64_t S, const T* x, T* y) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t s = 0; s < S; ++s) y[(b * S + s) * R + r] = x[(b * R + r) * S + s];
    }
  }
}

// For each y element, its index (i_0, ..., i_{d-1}) is decoded from the flat position, innermost
// axis first; axis k of y is axis order[k] of x, so i_k moves x's offset by i_k * stride[order[k]].
template <class T>
void permute(int ndim, const int64_t* x_shape, const int* order, const T* x, T* y) {
  std::vector<int64_t> stride(static_cast<size_t>(ndim));
  int64_t n = 1;
  for (int a = ndim - 1; a >= 0; --a) {
    stride[size_t(a)] = n;
    n *= x_shape[a];
  }
  for (int64_t out = 0; out < n; ++out) {
    int64_t rest = out, in = 0;
    for (int k = ndim - 1; k >= 0; --k) {
      const int64_t extent = x_shape[order[k]];
      in += (rest % extent) * stride[size_t(order[k])];
      rest /= extent;
    }
    y[out] = x[in];
  }
}

template void batched_transpose<float>(int64_t, int64_t, int64_t, const float*, float*);
template void batched_transpose<double>(int64_t, int64_t, int64_t, const double*, double*);
template void permute<float>(int, const int64_t*, const int*, const float*, float*);
template void permute<double>(int, const int64_t*, const int*, const double*, double*);

}  // namespace crema::kernels::ref
