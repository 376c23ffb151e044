// im2col / col2im, reference: one loop per index of the definition in im2col.h.
#include "kernels/im2col/im2col.h"

namespace crema::kernels::ref {

namespace {

// Calls visit(entry, pixel) for every entry of col, in col's order: entry (c*R + r)*S + s, p*Q + q
// reads pixel (c*H + h)*W + w with h = p*stride_h - pad_h + r*dilation_h (w likewise), or -1
// where that lies in the padding.
template <class Visit>
void for_each_entry(const Im2colGeometry& g, Visit visit) {
  const int64_t P = g.P(), Q = g.Q();
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t row = (c * g.R + r) * g.S + s;
        for (int64_t p = 0; p < P; ++p) {
          for (int64_t q = 0; q < Q; ++q) {
            const int64_t h = p * g.stride_h - g.pad_h + r * g.dilation_h;
            const int64_t w = q * g.stride_w - g.pad_w + s * g.dilation_w;
            const bool inside = h >= 0 && h < g.H && w >= 0 && w < g.W;
            visit(row * P * Q + p * Q + q, inside ? (c * g.H + h) * g.W + w : int64_t(-1));
          }
        }
      }
    }
  }
}

}  // namespace

template <class T>
void im2col(const Im2colGeometry& g, const T* im, T* col) {
  for_each_entry(g,
                 [&](int64_t entry, int64_t pixel) { col[entry] = pixel >= 0 ? im[pixel] : T(0); });
}

template <class T>
void col2im(const Im2colGeometry& g, const T* col, T* im) {
  for_each_entry(g, [&](int64_t entry, int64_t pixel) {
    if (pixel >= 0) im[pixel] += col[entry];
  });
}

template void im2col<float>(const Im2colGeometry&, const float*, float*);
template void im2col<double>(const Im2colGeometry&, const double*, double*);
template void col2im<float>(const Im2colGeometry&, const float*, float*);
template void col2im<double>(const Im2colGeometry&, const double*, double*);

}  // namespace crema::kernels::ref
