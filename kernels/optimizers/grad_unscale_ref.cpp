// Unscaling gradients, the reference: the formula of grad_unscale.h element by element.
#include <cmath>

#include "kernels/optimizers/grad_unscale.h"

namespace crema::kernels::ref {

template <class T>
bool unscale_gradients(int64_t n, T* g, T inv_scale) {
  bool found_inf = false;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(g[i])) found_inf = true;
    g[i] = g[i] * inv_scale;
  }
  return found_inf;
}

template bool unscale_gradients<float>(int64_t, float*, float);
template bool unscale_gradients<double>(int64_t, double*, double);

}  // namespace crema::kernels::ref
