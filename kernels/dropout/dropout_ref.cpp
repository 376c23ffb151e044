// Dropout, reference: the formulas of dropout.h, one element at a time.
#include "kernels/dropout/dropout.h"
#include "kernels/dropout/dropout_hash.h"

namespace crema::kernels::ref {

template <class T>
void dropout_forward(int64_t n, const T* x, T* y, float ratio, uint64_t seed, uint64_t step) {
  const uint64_t key = dropout_hash::key(seed, step);
  const uint32_t threshold = dropout_hash::threshold(ratio);
  const T scale = T(dropout_scale(ratio));
  for (int64_t i = 0; i < n; ++i) {
    y[i] = dropout_hash::keep(key, uint64_t(i), threshold) ? x[i] * scale : T(0);
  }
}

template <class T>
void dropout_backward(int64_t n, const T* dy, T* dx, float ratio, uint64_t seed, uint64_t step) {
  dropout_forward(n, dy, dx, ratio, seed, step);  // the same mask and factor
}

template <class T>
void stochastic_depth(int64_t rows, int64_t row_size, const T* in, T* out, float ratio,
                      uint64_t seed, uint64_t step) {
  const uint64_t key = dropout_hash::key(seed, step);
  const uint32_t threshold = dropout_hash::threshold(ratio);
  const T scale = T(dropout_scale(ratio));
  for (int64_t n = 0; n < rows; ++n) {
    const bool keep = dropout_hash::keep(key, uint64_t(n), threshold);
    for (int64_t i = n * row_size; i < (n + 1) * row_size; ++i)
      out[i] = keep ? in[i] * scale : T(0);
  }
}

template void dropout_forward<float>(int64_t, const float*, float*, float, uint64_t, uint64_t);
template void dropout_forward<double>(int64_t, const double*, double*, float, uint64_t, uint64_t);
template void dropout_backward<float>(int64_t, const float*, float*, float, uint64_t, uint64_t);
template void dropout_backward<double>(int64_t, const double*, double*, float, uint64_t, uint64_t);

template void stochastic_depth<float>(int64_t, int64_t, const float*, float*, float, uint64_t,
                                      uint64_t);
template void stochastic_depth<double>(int64_t, int64_t, const double*, double*, float, uint64_t,
                                       uint64_t);

}  // namespace crema::kernels::ref
