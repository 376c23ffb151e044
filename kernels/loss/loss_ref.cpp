// Pointwise losses, reference: the formulas of loss.h, one element at a time.
#include "kernels/loss/loss.h"

#include <algorithm>
#include <cmath>

namespace crema::kernels::ref {
namespace {

template <class T>
bool ignored(T target, const SigmoidCrossEntropyOptions& options) {
  return options.has_ignore_label && target == T(options.ignore_label);
}

}  // namespace

template <class T>
double sigmoid_cross_entropy_forward(int64_t n, const T* x, const T* t,
                                     const SigmoidCrossEntropyOptions& options, int64_t* counted) {
  double loss = 0;
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (ignored(t[k], options)) continue;
    // -t log(sigmoid(x)) - (1 - t) log(1 - sigmoid(x)), without overflow.
    loss += std::max(x[k], T(0)) - x[k] * t[k] + std::log1p(std::exp(-std::abs(x[k])));
    ++count;
  }
  if (counted != nullptr) *counted = count;
  return loss;
}

template <class T>
void sigmoid_cross_entropy_backward(int64_t n, const T* x, const T* t,
                                    const SigmoidCrossEntropyOptions& options, T scale, T* dx) {
  for (int64_t k = 0; k < n; ++k) {
    const T sigmoid = T(1) / (T(1) + std::exp(-x[k]));
    dx[k] = ignored(t[k], options) ? T(0) : scale * (sigmoid - t[k]);
  }
}

template <class T>
double euclidean_loss_forward(int64_t n, const T* a, const T* b) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += double(a[k] - b[k]) * double(a[k] - b[k]);
  return sum;
}

template <class T>
void euclidean_loss_backward(int64_t n, const T* a, const T* b, T scale, T* da, T* db) {
  for (int64_t k = 0; k < n; ++k) {
    if (da != nullptr) da[k] = scale * (a[k] - b[k]);
    if (db != nullptr) db[k] = -scale * (a[k] - b[k]);
  }
}

template double sigmoid_cross_entropy_forward<float>(int64_t, const float*, const float*,
                                                     const SigmoidCrossEntropyOptions&, int64_t*);
template double sigmoid_cross_entropy_forward<double>(int64_t, const double*, const double*,
                                                      const SigmoidCrossEntropyOptions&, int64_t*);
template void sigmoid_cross_entropy_backward<float>(int64_t, const float*, const float*,
                                                    const SigmoidCrossEntropyOptions&, float,
                                                    float*);
template void sigmoid_cross_entropy_backward<double>(int64_t, const double*, const double*,
                                                     const SigmoidCrossEntropyOptions&, double,
                                                     double*);
template double euclidean_loss_forward<float>(int64_t, const float*, const float*);
template double euclidean_loss_forward<double>(int64_t, const double*, const double*);
template void euclidean_loss_backward<float>(int64_t, const float*, const float*, float, float*,
                                             float*);
template void euclidean_loss_backward<double>(int64_t, const double*, const double*, double,
                                              double*, double*);

}  // namespace crema::kernels::ref
