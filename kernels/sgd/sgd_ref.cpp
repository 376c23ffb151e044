// SGD with momentum, reference: the three lines of sgd.h, one element at a time.
#include "kernels/sgd/sgd.h"

namespace crema::kernels::ref {

template <class T>
void sgd_momentum_update(int64_t n, T* w, const T* g, T* v, T lr, T momentum, T weight_decay) {
  for (int64_t i = 0; i < n; ++i) {
    const T regularized = g[i] + weight_decay * w[i];
    v[i] = momentum * v[i] + lr * regularized;
    w[i] -= v[i];
  }
}

template void sgd_momentum_update<float>(int64_t, float*, const float*, float*, float, float,
                                         float);
template void sgd_momentum_update<double>(int64_t, double*, const double*, double*, double, double,
                                          double);

}  // namespace crema::kernels::ref
