// 2-D convolution, reference: the sums of convolution.h written out as loops, one per index.
// Slow (no im2col, no blocking) and obviously right; every faster path is tested against it.
#include "kernels/convolution/convolution.h"

namespace crema::kernels::ref {
namespace {

// Calls f(x_index, w_index, y_index) for every term y[n,k,p,q] += w[k,c,r,s] * x[n,c',h,w]
// of the convolution sum whose input pixel lies inside the image (the offsets into x [N,C,H,W],
// w [K,C/groups,R,S] and y [N,K,P,Q]). Forward and both backward passes visit the same terms, which
// makes them adjoint by construction.
template <class F>
void for_each_term(const Conv2dGeometry& g, F f) {
  const int64_t P = g.P(), Q = g.Q();
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t group = k / Kg;
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t c = group * Cg + cg;
            for (int64_t r = 0; r < g.R; ++r) {
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t h = p * g.stride_h - g.pad_h + r * g.dilation_h;
                const int64_t w = q * g.stride_w - g.pad_w + s * g.dilation_w;
                if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                const int64_t x_index = ((n * g.C + c) * g.H + h) * g.W + w;
                const int64_t w_index = ((k * Cg + cg) * g.R + r) * g.S + s;
                const int64_t y_index = ((n * g.K + k) * P + p) * Q + q;
                f(x_index, w_index, y_index);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t PQ = g.P() * g.Q();
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t k = 0; k < g.K; ++k) {
      for (int64_t i = 0; i < PQ; ++i) y[(n * g.K + k) * PQ + i] = bias ? bias[k] : T(0);
    }
  }
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += w[wi] * x[xi]; });
}

template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx) {
  for (int64_t i = 0; i < g.N * g.C * g.H * g.W; ++i) dx[i] = T(0);
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
}

template <class T>
void conv2d_backward_filter(const Conv2dGeometry& g, const T* x, const T* dy, T* dw) {
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += dy[yi] * x[xi]; });
}

template <class T>
void conv2d_backward_bias(const Conv2dGeometry& g, const T* dy, T* db) {
  channel_bias_gradient(g.N, g.K, g.P() * g.Q(), dy, db);
}

template <class T>
void add_channel_bias(int64_t N, int64_t C, int64_t HW, const T* bias, T* y) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t i = 0; i < HW; ++i) y[(n * C + c) * HW + i] += bias[c];
    }
  }
}

template <class T>
void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const T* dy, T* db) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t i = 0; i < HW; ++i) db[c] += dy[(n * C + c) * HW + i];
    }
  }
}

template void conv2d_forward<float>(const Conv2dGeometry&, const float*, const float*, const float*,
                                    float*);
template void conv2d_backward_data<float>(const Conv2dGeometry&, const float*, const float*,
                                          float*);
template void conv2d_backward_filter<float>(const Conv2dGeometry&, const float*, const float*,
                                            float*);
template void conv2d_backward_bias<float>(const Conv2dGeometry&, const float*, float*);
template void conv2d_forward<double>(const Conv2dGeometry&, const double*, const double*,
                                     const double*, double*);
template void conv2d_backward_data<double>(const Conv2dGeometry&, const double*, const double*,
                                           double*);
template void conv2d_backward_filter<double>(const Conv2dGeometry&, const double*, const double*,
                                             double*);
template void conv2d_backward_bias<double>(const Conv2dGeometry&, const double*, double*);
template void add_channel_bias<float>(int64_t, int64_t, int64_t, const float*, float*);
template void add_channel_bias<double>(int64_t, int64_t, int64_t, const double*, double*);
template void channel_bias_gradient<float>(int64_t, int64_t, int64_t, const float*, float*);
template void channel_bias_gradient<double>(int64_t, int64_t, int64_t, const double*, double*);

}  // namespace crema::kernels::ref
