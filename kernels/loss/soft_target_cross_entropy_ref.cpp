// Soft-target cross-entropy, reference: the formulas of soft_target_cross_entropy.h, one (o, i) at
// a time.
#include <algorithm>
#include <cmath>

#include "kernels/loss/soft_target_cross_entropy.h"

namespace crema::kernels::ref {

template <class T>
double soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const T* logits,
                                         const T* targets, const SoftmaxLossOptions& options,
                                         T* prob) {
  const T eps = T(options.label_smoothing);
  double loss = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* x = logits + o * C * inner + i;  // class c at x[c * inner]
      const T* t = targets + o * C * inner + i;
      T m = x[0];
      for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c * inner]);
      T s = 0, t_sum = 0, tz = 0;
      for (int64_t c = 0; c < C; ++c) {
        const T smoothed = (T(1) - eps) * t[c * inner] + eps / T(C);
        s += std::exp(x[c * inner] - m);
        t_sum += smoothed;
        tz += smoothed * (x[c * inner] - m);
      }
      loss += double(t_sum * std::log(s) - tz);
    }
  }
  // After the terms: the softmax may overwrite the logits (prob may alias them).
  softmax_forward(outer, C, inner, logits, prob);
  return loss;
}

template <class T>
void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const T* prob,
                                        const T* targets, const SoftmaxLossOptions& options,
                                        T scale, T* dlogits) {
  const T eps = T(options.label_smoothing);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * C * inner + i;
      T t_sum = 0;
      for (int64_t c = 0; c < C; ++c)
        t_sum += (T(1) - eps) * targets[base + c * inner] + eps / T(C);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = base + c * inner;
        dlogits[k] = scale * (prob[k] * t_sum - ((T(1) - eps) * targets[k] + eps / T(C)));
      }
    }
  }
}

template double soft_target_cross_entropy_forward<float>(int64_t, int64_t, int64_t, const float*,
                                                         const float*, const SoftmaxLossOptions&,
                                                         float*);
template double soft_target_cross_entropy_forward<double>(int64_t, int64_t, int64_t, const double*,
                                                          const double*, const SoftmaxLossOptions&,
                                                          double*);
template void soft_target_cross_entropy_backward<float>(int64_t, int64_t, int64_t, const float*,
                                                        const float*, const SoftmaxLossOptions&,
                                                        float, float*);
template void soft_target_cross_entropy_backward<double>(int64_t, int64_t, int64_t, const double*,
                                                         const double*, const SoftmaxLossOptions&,
                                                         double, double*);

}  // namespace crema::kernels::ref
