// Softmax cross-entropy, reference: the formulas of softmax_cross_entropy.h, one (o, i) at a
// time.
#include "kernels/loss/softmax_cross_entropy.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace crema::kernels::ref {
namespace {

// The label-smoothed term of one position, -sum_c t_c log prob_c, from its logits x (classes
// `inner` apart): log(s) - (1 - eps) z[label] - (eps / C) sum_c z[c], z = x - max.
template <class T>
double smoothed_term(int64_t C, int64_t inner, const T* x, int64_t label, T eps) {
  T m = x[0];
  for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c * inner]);
  T sum = 0, z_sum = 0;
  for (int64_t c = 0; c < C; ++c) {
    sum += std::exp(x[c * inner] - m);
    z_sum += x[c * inner] - m;
  }
  return double(std::log(sum) - (T(1) - eps) * (x[label * inner] - m) - eps / T(C) * z_sum);
}

}  // namespace

template <class T>
double softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const T* logits,
                                     const T* labels, const SoftmaxLossOptions& options, T* prob,
                                     int64_t* valid_count) {
  const T eps = T(options.label_smoothing);
  double loss = 0;
  int64_t count = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (options.has_ignore_label && label == options.ignore_label) continue;
      // Before the softmax below, which may overwrite the logits (prob may alias them).
      if (eps > 0) loss += smoothed_term(C, inner, logits + o * C * inner + i, label, eps);
      ++count;
    }
  }
  softmax_forward(outer, C, inner, logits, prob);
  if (eps == 0) {  // Caffe's term: -log(max(prob[label], FLT_MIN))
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t label = int64_t(labels[o * inner + i]);
        if (options.has_ignore_label && label == options.ignore_label) continue;
        loss -= std::log(std::max(prob[(o * C + label) * inner + i], T(FLT_MIN)));
      }
    }
  }
  if (valid_count != nullptr) *valid_count = count;
  return loss;
}

template <class T>
void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const T* prob,
                                    const T* labels, const SoftmaxLossOptions& options, T scale,
                                    T* dlogits) {
  const T eps = T(options.label_smoothing);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      const bool ignored = options.has_ignore_label && label == options.ignore_label;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = (o * C + c) * inner + i;
        const T target = (c == label ? T(1) - eps : T(0)) + eps / T(C);
        dlogits[k] = ignored ? T(0) : scale * (prob[k] - target);
      }
    }
  }
}

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
