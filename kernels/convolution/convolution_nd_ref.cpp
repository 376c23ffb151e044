// N-d convolution, reference: the sums of convolution_nd.h as loops over the padded 3-axis form
// (a rank-1 or rank-2 geometry runs the same loops with leading axes of extent 1). Slow and
// obviously right: the oracle every N-d path is tested against.
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"

namespace crema::kernels::ref {
namespace {

// Calls f(x_index, w_index, y_index) for every term y[n,k,o,p,q] += w[k,c,t,r,s] * x[n,c',d,i,j]
// whose input element lies inside the volume. Forward and both backward passes visit the same
// terms, which makes them adjoint by construction.
template <class F>
void for_each_term(const ConvNdGeometry& nd, F f) {
  const ConvNdGeometry g = nd.padded();
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  const int64_t O[3] = {g.out(0), g.out(1), g.out(2)};
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t group = k / Kg;
      for (int64_t o = 0; o < O[0] * O[1] * O[2]; ++o) {
        const int64_t out[3] = {o / (O[1] * O[2]), o / O[2] % O[1], o % O[2]};
        for (int64_t cg = 0; cg < Cg; ++cg) {
          const int64_t c = group * Cg + cg;
          for (int64_t tap = 0; tap < g.kernel[0] * g.kernel[1] * g.kernel[2]; ++tap) {
            const int64_t t[3] = {tap / (g.kernel[1] * g.kernel[2]),
                                  tap / g.kernel[2] % g.kernel[1], tap % g.kernel[2]};
            int64_t at[3];
            bool inside = true;
            for (int a = 0; a < 3; ++a) {
              at[a] = out[a] * g.stride[a] - g.pad[a] + t[a] * g.dilation[a];
              inside = inside && at[a] >= 0 && at[a] < g.in[a];
            }
            if (!inside) continue;
            const int64_t x_index =
                (((n * g.C + c) * g.in[0] + at[0]) * g.in[1] + at[1]) * g.in[2] + at[2];
            const int64_t w_index = (k * Cg + cg) * g.kernel[0] * g.kernel[1] * g.kernel[2] + tap;
            const int64_t y_index = (n * g.K + k) * O[0] * O[1] * O[2] + o;
            f(x_index, w_index, y_index);
          }
        }
      }
    }
  }
}

}  // namespace

template <class T>
void conv_nd_forward(const ConvNdGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t volume = g.out_volume();
  for (int64_t i = 0; i < g.N * g.K * volume; ++i) y[i] = bias ? bias[i / volume % g.K] : T(0);
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += w[wi] * x[xi]; });
}

template <class T>
void conv_nd_backward_data(const ConvNdGeometry& g, const T* dy, const T* w, T* dx) {
  for (int64_t i = 0; i < g.N * g.C * g.in_volume(); ++i) dx[i] = T(0);
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
}

template <class T>
void conv_nd_backward_filter(const ConvNdGeometry& g, const T* x, const T* dy, T* dw) {
  for_each_term(g, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += dy[yi] * x[xi]; });
}

template void conv_nd_forward<float>(const ConvNdGeometry&, const float*, const float*,
                                     const float*, float*);
template void conv_nd_forward<double>(const ConvNdGeometry&, const double*, const double*,
                                      const double*, double*);
template void conv_nd_backward_data<float>(const ConvNdGeometry&, const float*, const float*,
                                           float*);
template void conv_nd_backward_data<double>(const ConvNdGeometry&, const double*, const double*,
                                            double*);
template void conv_nd_backward_filter<float>(const ConvNdGeometry&, const float*, const float*,
                                             float*);
template void conv_nd_backward_filter<double>(const ConvNdGeometry&, const double*, const double*,
                                              double*);

}  // namespace crema::kernels::ref
