// Backward data's filter transposes on the GPU (convolution_tc_transpose_cuda.cu): the gather
// form of backward data reads the filter with K as its inner index, wt[g, c, tap, k] =
// w[g*Kg + k, r, s, c]. The 16-bit passes (convolution_tc_cuda.cu: the mma.sync kernels, and the
// wgmma kernels where they cannot read w itself) and the f32 NHWC ones (convolution_nhwc_cuda.cu)
// call them; each is queued on `stream`. Host code.
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::tc {

// wt [G, Cg, R*S (phase order), Kg] = w [K, R, S, Cg] transposed per group, the taps ordered by
// output phase (each phase's taps contiguous, in (r, s) order: convolution_tc_phase.h's
// first_tap and extents; the identity at stride 1 and for a 1x1): 16-bit (any groups), and f32
// (groups 1: the tf32 wgmma backward data).
void transpose_filter_phase_order(const Conv2dGeometry& g, const uint16_t* w, uint16_t* wt,
                                  gpu::Stream stream);
void transpose_filter_phase_order(const Conv2dGeometry& g, const float* w, float* wt,
                                  gpu::Stream stream);
// wt [G, Cg, R*S, Kg] = w [K, R, S, Cg] transposed per group, f32, the taps in their own order
// (the f32 NHWC backward data's mma.sync kernels).
void transpose_filter_groups(const Conv2dGeometry& g, const float* w, float* wt,
                             gpu::Stream stream);

}  // namespace crema::kernels::cuda::tc
