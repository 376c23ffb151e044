// N-d pooling, reference and CPU path: the plane loops of pooling_nd_plane.h, plane after plane
// (ref::, in float or double) or a plane per OpenMP thread (cpu::, float).
#include <omp.h>

#include "kernels/pooling/pooling_nd.h"
#include "kernels/pooling/pooling_nd_plane.h"

namespace crema::kernels {

namespace ref {

template <class T>
void pool_nd_forward(const PoolNdGeometry& nd, PoolMode mode, const T* x, T* y, T* argmax) {
  const PoolNdGeometry g = nd.padded();
  const int64_t in = g.in_volume(), out = g.out_volume();
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    pooling_detail::pool_plane_forward(g, mode, x + plane * in, y + plane * out,
                                       argmax ? argmax + plane * out : nullptr);
  }
}

template <class T>
void pool_nd_backward(const PoolNdGeometry& nd, PoolMode mode, const T* dy, const T* argmax,
                      T* dx) {
  const PoolNdGeometry g = nd.padded();
  const int64_t in = g.in_volume(), out = g.out_volume();
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    pooling_detail::pool_plane_backward(g, mode, dy + plane * out,
                                        argmax ? argmax + plane * out : nullptr, dx + plane * in);
  }
}

template void pool_nd_forward<float>(const PoolNdGeometry&, PoolMode, const float*, float*, float*);
template void pool_nd_forward<double>(const PoolNdGeometry&, PoolMode, const double*, double*,
                                      double*);
template void pool_nd_backward<float>(const PoolNdGeometry&, PoolMode, const float*, const float*,
                                      float*);
template void pool_nd_backward<double>(const PoolNdGeometry&, PoolMode, const double*,
                                       const double*, double*);

}  // namespace ref

namespace cpu {

void pool_nd_forward(const PoolNdGeometry& nd, PoolMode mode, const float* x, float* y,
                     float* argmax, int num_threads) {
  const PoolNdGeometry g = nd.padded();
  const int64_t in = g.in_volume(), out = g.out_volume();
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1)
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    pooling_detail::pool_plane_forward(g, mode, x + plane * in, y + plane * out,
                                       argmax ? argmax + plane * out : nullptr);
  }
}

void pool_nd_backward(const PoolNdGeometry& nd, PoolMode mode, const float* dy, const float* argmax,
                      float* dx, int num_threads) {
  const PoolNdGeometry g = nd.padded();
  const int64_t in = g.in_volume(), out = g.out_volume();
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1)
  for (int64_t plane = 0; plane < g.N * g.C; ++plane) {
    pooling_detail::pool_plane_backward(g, mode, dy + plane * out,
                                        argmax ? argmax + plane * out : nullptr, dx + plane * in);
  }
}

}  // namespace cpu

}  // namespace crema::kernels
