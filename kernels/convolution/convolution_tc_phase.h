// The output phases of a strided backward data pass (convolution_tc_cuda.cu's top comment has
// the math): dx's pixels h = first + stride i of phase rho take exactly the filter rows r with
// r*dil % stride == rho, and read dy for them at stride 1. Host code, shared by the mma.sync
// pass (convolution_tc_cuda.cu) and the wgmma one (convolution_tc_wgmma_sm90a.cu), which both
// read the filter transposed with its taps in phase order (transpose_filter_kernel).
#pragma once

#include <numeric>

namespace crema::kernels::cuda::tc {

// One dimension of an output phase rho: dx rows first + stride i for i < extent, its taps
// (`before` taps of lower phases), and dy's offset and per-tap step: tap t of the phase reads dy
// row i + offset - t * dilation.
struct PhaseAxis {
  int first, extent, taps, before, offset, dilation;
};

inline PhaseAxis phase_axis(int rho, int size, int taps, int pad, int stride, int dilation) {
  PhaseAxis a{};
  a.first = ((rho - pad) % stride + stride) % stride;
  a.extent = a.first < size ? (size - a.first + stride - 1) / stride : 0;
  int r0 = 0;
  for (int r = taps - 1; r >= 0; --r) {
    const int phase = r * dilation % stride;
    a.before += phase < rho;
    if (phase == rho) ++a.taps, r0 = r;
  }
  // Exact: first + pad and r0 * dilation are both rho mod stride.
  if (a.taps > 0) a.offset = (a.first + pad - r0 * dilation) / stride;
  a.dilation = dilation / std::gcd(dilation, stride);
  return a;
}

// Where phase (h, w)'s taps start among the transposed filter's R x S (phase order), given the
// filter's S.
inline int phase_first_tap(const PhaseAxis& h, const PhaseAxis& w, int S) {
  return h.before * S + h.taps * w.before;
}

}  // namespace crema::kernels::cuda::tc
