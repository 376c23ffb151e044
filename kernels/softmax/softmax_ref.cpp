// Softmax and softmax cross-entropy, reference: the formulas of softmax.h, one (o, i) at a time.
#include "kernels/softmax/softmax.h"

#include <algorithm>
#include <cfloat>
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
double softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const T* logits,
                                     const T* labels, const SoftmaxLossOptions& options, T* prob,
                                     int64_t* valid_count) {
  softmax_forward(outer, C, inner, logits, prob);
  double loss = 0;
  int64_t count = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (options.has_ignore_label && label == options.ignore_label) continue;
      loss -= std::log(std::max(prob[(o * C + label) * inner + i], T(FLT_MIN)));
      ++count;
    }
  }
  if (valid_count != nullptr) *valid_count = count;
  return loss;
}

template <class T>
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const T* prob,
                                    const T* labels, const SoftmaxLossOptions& options, T scale,
                                    T* dlogits) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      const bool ignored = options.has_ignore_label && label == options.ignore_label;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = (o * C + c) * inner + i;
        dlogits[k] = ignored ? T(0) : scale * (prob[k] - (c == label ? T(1) : T(0)));
      }
    }
  }
}

template void softmax_forward<float>(int64_t, int64_t, int64_t, const float*, float*);
template void softmax_forward<double>(int64_t, int64_t, int64_t, const double*, double*);
template void softmax_backward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                      float*);
template void softmax_backward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                       double*);
template double softmax_cross_entropy_forward<float>(int64_t, int64_t, int64_t, const float*,
                                                     const float*, const SoftmaxLossOptions&,
                                                     float*, int64_t*);
template double softmax_cross_entropy_forward<double>(int64_t, int64_t, int64_t, const double*,
                                                      const double*, const SoftmaxLossOptions&,
                                                      double*, int64_t*);
template void softmax_cross_entropy_backward<float>(int64_t, int64_t, int64_t, const float*,
                                                    const float*, const SoftmaxLossOptions&, float,
                                                    float*);
template void softmax_cross_entropy_backward<double>(int64_t, int64_t, int64_t, const double*,
                                                     const double*, const SoftmaxLossOptions&,
                                                     double, double*);

}  // namespace crema::kernels::ref
