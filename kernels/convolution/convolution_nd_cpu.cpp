// N-d convolution, fast CPU path: vol2col + cpu::sgemm per image and group, the 2-D im2col path
// (convolution_cpu.cpp) one axis up, on the padded 3-axis form. With Cg = C/G, Kg = K/G,
// CTRS = Cg*T*R*S rows of col and O = out_volume columns, per image n and group:
//
//   forward   col[CTRS, O]  = vol2col(x[n, group's channels])
//             y[n, group's k][Kg, O] = w_g[Kg, CTRS] * col + bias    (written in place)
//   data      dcol[CTRS, O] = w_g^T * dy[n, group's k]
//             dx[n, group's c] += col2vol(dcol)                     (dx zeroed first)
//   filter    dw_g[Kg, CTRS] += dy[n, group's k] * col^T
//
// vol2col and col2vol split over channels on the OpenMP threads (channel c reads and writes only
// its own T*R*S rows of col); the GEMMs split themselves. One image at a time keeps col to one
// image's patches (C3D's conv2 at 16x56x56: 64*27 rows x 50176 columns, 347 MB; a batch of them
// would not fit in memory, let alone in cache).
#include <omp.h>

#include <cstring>

#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cpu {
namespace {

// The rows of col that one channel owns: tap (t, r, s) of it reads, for every output position,
// im[d, i, j] (0 outside). kToCol: col = vol2col(im) (Im is const float); else im += col2vol(col)
// (Im is float). Rows (o, p) outside the volume are skipped whole.
template <bool kToCol, class Im>
void vol2col_channel(const ConvNdGeometry& g, Im* im, float* col) {
  const int64_t O0 = g.out(0), O1 = g.out(1), O2 = g.out(2);
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int64_t tap = 0; tap < taps; ++tap) {
    const int64_t t = tap / (g.kernel[1] * g.kernel[2]), r = tap / g.kernel[2] % g.kernel[1],
                  s = tap % g.kernel[2];
    float* row = col + tap * O0 * O1 * O2;
    for (int64_t o = 0; o < O0; ++o) {
      const int64_t d = o * g.stride[0] - g.pad[0] + t * g.dilation[0];
      for (int64_t p = 0; p < O1; ++p) {
        const int64_t i = p * g.stride[1] - g.pad[1] + r * g.dilation[1];
        float* out = row + (o * O1 + p) * O2;
        if (d < 0 || d >= g.in[0] || i < 0 || i >= g.in[1]) {
          if (kToCol) std::memset(out, 0, sizeof(float) * size_t(O2));
          continue;
        }
        Im* in = im + (d * g.in[1] + i) * g.in[2];
        for (int64_t q = 0; q < O2; ++q) {
          const int64_t j = q * g.stride[2] - g.pad[2] + s * g.dilation[2];
          const bool inside = j >= 0 && j < g.in[2];
          if constexpr (kToCol) {
            out[q] = inside ? in[j] : 0.0f;
          } else if (inside) {
            in[j] += out[q];
          }
        }
      }
    }
  }
}

// vol2col (kToCol) or col2vol of the Cg channels at `im` (one group of one image), channels on
// the threads.
template <bool kToCol, class Im>
void vol2col(const ConvNdGeometry& g, int64_t Cg, Im* im, float* col, int num_threads) {
  const int64_t plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t rows = g.kernel[0] * g.kernel[1] * g.kernel[2] * g.out(0) * g.out(1) * g.out(2);
#pragma omp parallel for num_threads(num_threads) schedule(static) if (num_threads > 1 && Cg > 1)
  for (int64_t c = 0; c < Cg; ++c) vol2col_channel<kToCol>(g, im + c * plane, col + c * rows);
}

struct Sizes {
  int64_t Cg, Kg, CTRS, O, in_volume;
  explicit Sizes(const ConvNdGeometry& g)
      : Cg(g.C / g.groups),
        Kg(g.K / g.groups),
        CTRS(Cg * g.kernel[0] * g.kernel[1] * g.kernel[2]),
        O(g.out(0) * g.out(1) * g.out(2)),
        in_volume(g.in[0] * g.in[1] * g.in[2]) {}
};

}  // namespace

size_t conv_nd_workspace(const ConvNdGeometry& g) {
  const Sizes z(g.padded());
  return size_t(z.CTRS * z.O);
}

void conv_nd_forward(const ConvNdGeometry& nd, const float* x, const float* w, const float* bias,
                     float* y, float* workspace, int num_threads) {
  const ConvNdGeometry g = nd.padded();
  const Sizes z(g);
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      vol2col<true>(g, z.Cg, x + (n * g.C + group * z.Cg) * z.in_volume, workspace, num_threads);
      float* out = y + (n * g.K + group * z.Kg) * z.O;
      sgemm(false, false, z.Kg, z.O, z.CTRS, 1.0f, w + group * z.Kg * z.CTRS, z.CTRS, workspace,
            z.O, 0.0f, out, z.O, num_threads);
    }
  }
  if (bias != nullptr) add_channel_bias(g.N, g.K, z.O, bias, y, num_threads);
}

void conv_nd_backward_data(const ConvNdGeometry& nd, const float* dy, const float* w, float* dx,
                           float* workspace, int num_threads) {
  const ConvNdGeometry g = nd.padded();
  const Sizes z(g);
  std::memset(dx, 0, sizeof(float) * size_t(g.N * g.C * z.in_volume));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      sgemm(true, false, z.CTRS, z.O, z.Kg, 1.0f, w + group * z.Kg * z.CTRS, z.CTRS,
            dy + (n * g.K + group * z.Kg) * z.O, z.O, 0.0f, workspace, z.O, num_threads);
      vol2col<false>(g, z.Cg, dx + (n * g.C + group * z.Cg) * z.in_volume, workspace, num_threads);
    }
  }
}

void conv_nd_backward_filter(const ConvNdGeometry& nd, const float* x, const float* dy, float* dw,
                             float* workspace, int num_threads) {
  const ConvNdGeometry g = nd.padded();
  const Sizes z(g);
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      vol2col<true>(g, z.Cg, x + (n * g.C + group * z.Cg) * z.in_volume, workspace, num_threads);
      sgemm(false, true, z.Kg, z.CTRS, z.O, 1.0f, dy + (n * g.K + group * z.Kg) * z.O, z.O,
            workspace, z.O, 1.0f, dw + group * z.Kg * z.CTRS, z.CTRS, num_threads);
    }
  }
}

}  // namespace crema::kernels::cpu
