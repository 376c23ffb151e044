// Scale and bias, reference: the definitions of scale.h, one element at a time.
#include "kernels/scale/scale.h"

namespace crema::kernels::ref {

template <class T>
void scale_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const T* scale,
                   const T* bias, T* y) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < C; ++c) {
      const T s = scale ? scale[c] : T(1), b = bias ? bias[c] : T(0);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t e = (o * C + c) * inner + i;
        y[e] = x[e] * s + b;
      }
    }
  }
}

template <class T>
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, T* out) {
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t e = (o * C + c) * inner + i;
        sum += double(dy[e]) * (x ? double(x[e]) : 1.0);
      }
    }
    out[c] = accumulate ? T(double(out[c]) + sum) : T(sum);
  }
}

template void scale_forward<float>(int64_t, int64_t, int64_t, const float*, const float*,
                                   const float*, float*);
template void scale_forward<double>(int64_t, int64_t, int64_t, const double*, const double*,
                                    const double*, double*);
template void channel_reduce<float>(int64_t, int64_t, int64_t, const float*, const float*, bool,
                                    float*);
template void channel_reduce<double>(int64_t, int64_t, int64_t, const double*, const double*, bool,
                                     double*);

}  // namespace crema::kernels::ref
