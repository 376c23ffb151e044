// 2-D convolution in NHWC, reference: transpose to NCHW / KCRS, run the NCHW reference, transpose
// the result back. Slow and obviously right (the oracle of the NHWC kernels' tests).
#include <vector>

#include "kernels/convolution/convolution.h"
#include "kernels/layout/layout.h"

namespace crema::kernels::ref {
namespace {

// [B, R, S] -> [B, S, R] into a new vector.
template <class T>
std::vector<T> transposed(int64_t B, int64_t R, int64_t S, const T* x) {
  std::vector<T> y(size_t(B * R * S));
  batched_transpose<T>(B, R, S, x, y.data());
  return y;
}

}  // namespace

template <class T>
void conv2d_forward_nhwc(const Conv2dGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t HW = g.H * g.W, RS = g.R * g.S, Cg = g.C / g.groups, PQ = g.P() * g.Q();
  const std::vector<T> x_nchw = transposed(g.N, HW, g.C, x);  // [N, C, H*W]
  const std::vector<T> w_kcrs = transposed(g.K, RS, Cg, w);   // [K, Cg, R*S]
  std::vector<T> y_nchw(size_t(g.N * g.K * PQ));              // [N, K, P*Q]
  conv2d_forward<T>(g, x_nchw.data(), w_kcrs.data(), bias, y_nchw.data());
  batched_transpose<T>(g.N, g.K, PQ, y_nchw.data(), y);
}

template <class T>
void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const T* dy, const T* w, T* dx) {
  const int64_t HW = g.H * g.W, RS = g.R * g.S, Cg = g.C / g.groups, PQ = g.P() * g.Q();
  const std::vector<T> dy_nchw = transposed(g.N, PQ, g.K, dy);  // [N, K, P*Q]
  const std::vector<T> w_kcrs = transposed(g.K, RS, Cg, w);     // [K, Cg, R*S]
  std::vector<T> dx_nchw(size_t(g.N * g.C * HW));               // [N, C, H*W]
  conv2d_backward_data<T>(g, dy_nchw.data(), w_kcrs.data(), dx_nchw.data());
  batched_transpose<T>(g.N, g.C, HW, dx_nchw.data(), dx);
}

template <class T>
void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const T* x, const T* dy, T* dw) {
  const int64_t HW = g.H * g.W, RS = g.R * g.S, Cg = g.C / g.groups, PQ = g.P() * g.Q();
  const std::vector<T> x_nchw = transposed(g.N, HW, g.C, x);    // [N, C, H*W]
  const std::vector<T> dy_nchw = transposed(g.N, PQ, g.K, dy);  // [N, K, P*Q]
  std::vector<T> dw_kcrs = transposed(g.K, RS, Cg, dw);         // [K, Cg, R*S], accumulated
  conv2d_backward_filter<T>(g, x_nchw.data(), dy_nchw.data(), dw_kcrs.data());
  batched_transpose<T>(g.K, Cg, RS, dw_kcrs.data(), dw);
}

template void conv2d_forward_nhwc<float>(const Conv2dGeometry&, const float*, const float*,
                                         const float*, float*);
template void conv2d_forward_nhwc<double>(const Conv2dGeometry&, const double*, const double*,
                                          const double*, double*);
template void conv2d_backward_data_nhwc<float>(const Conv2dGeometry&, const float*, const float*,
                                               float*);
template void conv2d_backward_data_nhwc<double>(const Conv2dGeometry&, const double*, const double*,
                                                double*);
template void conv2d_backward_filter_nhwc<float>(const Conv2dGeometry&, const float*, const float*,
                                                 float*);
template void conv2d_backward_filter_nhwc<double>(const Conv2dGeometry&, const double*,
                                                  const double*, double*);

}  // namespace crema::kernels::ref
