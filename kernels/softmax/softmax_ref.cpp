// Softmax and log-softmax, reference: the formulas of softmax.h, one (o, i) at a time.
#include "kernels/softmax/softmax.h"

#include <algorithm>
#include <cmath>

namespace crema::kernels::ref {

template <class T>
void softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;  // element (o, 0, i); classes are inner apart
      T m = x[base];
      for (int64_t c = 1; c < C; ++c) m = std::max(m, x[base + c * inner]);
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) {
        y[base + c * inner] = std::exp(x[base + c * inner] - m);
        sum += y[base + c * inner];
      }
      for (int64_t c = 0; c < C; ++c) y[base + c * inner] /= sum;
    }
  }
}

template <class T>
void softmax_fast_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) {
        y[base + c * inner] = std::exp(x[base + c * inner]);
        sum += y[base + c * inner];
      }
      for (int64_t c = 0; c < C; ++c) y[base + c * inner] /= sum;
    }
  }
}

template <class T>
void softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;
      T dot = 0;
      for (int64_t c = 0; c < C; ++c) dot += dy[base + c * inner] * y[base + c * inner];
      for (int64_t c = 0; c < C; ++c) {
        dx[base + c * inner] = y[base + c * inner] * (dy[base + c * inner] - dot);
      }
    }
  }
}

template <class T>
void log_softmax_forward(int64_t outer, int64_t C, int64_t inner, const T* x, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;
      T m = x[base];
      for (int64_t c = 1; c < C; ++c) m = std::max(m, x[base + c * inner]);
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[base + c * inner] - m);
      const T log_sum = std::log(sum);
      for (int64_t c = 0; c < C; ++c) y[base + c * inner] = (x[base + c * inner] - m) - log_sum;
    }
  }
}

template <class T>
void log_softmax_backward(int64_t outer, int64_t C, int64_t inner, const T* y, const T* dy, T* dx) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += dy[base + c * inner];
      for (int64_t c = 0; c < C; ++c) {
        dx[base + c * inner] = dy[base + c * inner] - std::exp(y[base + c * inner]) * sum;
      }
    }
  }
}

template void softmax_forward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void softmax_forward<double>(int64_t, int64_t, int64_t, const double*, double*);
template void softmax_fast_forward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void softmax_fast_forward<double>(int64_t, int64_t, int64_t, const double*, double*);
template void softmax_backward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                      float*);
template void softmax_backward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                       double*);
template void log_softmax_forward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void log_softmax_forward<double>(int64_t, int64_t, int64_t, const double*, double*);
template void log_softmax_backward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                          float*);
template void log_softmax_backward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                           double*);
}  // namespace crema::kernels::ref
