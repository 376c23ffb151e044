// PReLU, reference: the formulas of prelu.h, one element at a time, in [N, C, D] order.
#include "kernels/activations/prelu.h"

namespace crema::kernels::ref {

template <class T>
void prelu_forward(int64_t N, int64_t C, int64_t D, const T* x, const T* slope, T* y) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = (n * C + c) * D + d;
        y[i] = x[i] > 0 ? x[i] : slope[c] * x[i];
      }
    }
  }
}

template <class T>
void prelu_backward_data(int64_t N, int64_t C, int64_t D, const T* x, const T* slope, const T* dy,
                         T* dx) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = (n * C + c) * D + d;
        dx[i] = x[i] > 0 ? dy[i] : slope[c] * dy[i];
      }
    }
  }
}

// Summed in double whatever T is: the oracle should not carry float rounding of its own.
template <class T>
void prelu_backward_slope(int64_t N, int64_t C, int64_t D, const T* x, const T* dy, T* dslope) {
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = (n * C + c) * D + d;
        if (!(x[i] > 0)) sum += double(x[i]) * double(dy[i]);
      }
    }
    dslope[c] += T(sum);
  }
}

template void prelu_forward<float>(int64_t, int64_t, int64_t, const float*, const float*, float*);
template void prelu_forward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                    double*);
template void prelu_backward_data<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                         const float*, float*);
template void prelu_backward_data<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                          const double*, double*);
template void prelu_backward_slope<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                          float*);
template void prelu_backward_slope<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                           double*);

}  // namespace crema::kernels::ref
