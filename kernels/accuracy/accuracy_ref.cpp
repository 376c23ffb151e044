// Top-k accuracy, reference: the rule of accuracy.h, one position at a time.
#include "kernels/accuracy/accuracy.h"

#include <cmath>

namespace crema::kernels::ref {

template <class T>
AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const T* scores, const T* labels,
                       int top_k, bool has_ignore_label, int ignore_label) {
  AccuracyCount count;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (has_ignore_label && label == ignore_label) continue;
      const T* s = scores + o * C * inner + i;  // class c at s[c * inner]
      const T mine = s[label * inner];
      int64_t beating = 0;  // other classes scoring higher than the label, NaN counting as higher
      for (int64_t c = 0; c < C; ++c) {
        const T other = s[c * inner];
        if (c != label && (other >= mine || std::isnan(other) || std::isnan(mine))) ++beating;
      }
      if (beating < top_k) ++count.correct;
      ++count.counted;
    }
  }
  return count;
}

template <class T>
void target_labels(int64_t outer, int64_t C, int64_t inner, const T* targets, T* labels) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* t = targets + o * C * inner + i;
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c) {
        if (t[c * inner] > t[best * inner] || std::isnan(t[best * inner])) best = c;
      }
      labels[o * inner + i] = T(best);
    }
  }
}

template AccuracyCount accuracy<float>(int64_t, int64_t, int64_t, const float*, const float*, int,
                                       bool, int);
template AccuracyCount accuracy<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                        int, bool, int);
template void target_labels<float>(int64_t, int64_t, int64_t, const float*, float*);
template void target_labels<double>(int64_t, int64_t, int64_t, const double*, double*);

}  // namespace crema::kernels::ref
