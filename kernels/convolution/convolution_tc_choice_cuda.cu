// Which kernel family `best` (and a forced TcKernels value) runs for each pass of a convolution
// on 16-bit NHWC tensors (convolution_tc.h): wgmma or mma.sync, halo tiles, col2im, the direct
// few-channel kernels, the stem's forward. Each rule carries the measurement behind it; the
// launches are convolution_tc_cuda.cu's (forward, backward data) and the families' own files.
// Host code over the geometry and the device's compute capability.
#include <algorithm>

#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_col2im_nhwc.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/convolution_few_channels_mma.h"
#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {

// `best` leaves filters of taps over fewer than 24 channels to mma.sync: a slab of 64 channels is
// then mostly padding (H200, 2026-11-27, session 17's bf16 suite, both families timed in one run:
// 5x5 16->32 wgmma 1.55x mma.sync's time, 16->48 1.31x; at 24 even, at 32 mixed, 0.79-1.25x).
bool conv2d_tc_forward_uses_wgmma(const Conv2dGeometry& g, TcKernels kernels) {
  if (kernels == TcKernels::best && !(g.R == 1 && g.S == 1) && g.C / g.groups < 24) return false;
  return wgmma_allowed(kernels) && tc::wgmma_forward_fits(g) && detail::device_is_sm90();
}

// `best` takes wgmma wherever it fits: since the staged 16-byte epilogue (session 10) it beats
// mma.sync on every geometry both run. H200, 2026-11-26, `crema bench conv-tc --math bf16`,
// ResNet-50's 1x1 layers at batch 128, TFLOP/s mma.sync -> wgmma: 256->64 at 56 56 -> 73,
// 512->256 at 28 137 -> 211, 1024->256 at 14 128 -> 196, strided 256->512 at 56 92 -> 230,
// 512->1024 at 28 127 -> 310, 1024->2048 at 14 129 -> 256 (the 3x3s won before); before it the
// short reductions (K = 64 to 512) lost by up to 1.7x to the pair stores.
// A 1x1 whose reduction (K) or output (C) has fewer than 40 channels stays on mma.sync under
// `best`: one mostly empty slab a tile (H200, 2026-11-27, session 17's bf16 suite: mma.sync 10-14%
// faster at 32->16, 16->96, 24->144 and 144->24; wgmma ahead at 40->240). So does a filter with
// taps onto at most 8 channels: 8 of a tile's 64 columns (H200, 2026-11-28, `crema bench
// conv-tc`: 32,8,56,56 -> 32 3x3 halo tiles 0.067 ms, mma.sync 0.030; 128,8,28,28 -> 16 5x5
// 0.112 against 0.037; at 16 channels mixed: 3x3 0.027 against 0.022, 5x5 0.014 against 0.021).
// Except where streaming tiles take the 1x1 (H200, 2026-11-29, session 28, same benchmark, ms
// mma.sync / streaming
// tiles: 16,144,56,56 -> 24 0.0284 / 0.0123, 16,32,112,112 -> 16 0.0312 / 0.0134, 16,16,112,112 ->
// 96 0.0340 / 0.0175, 16,192,28,28 -> 32 0.0141 / 0.0064).
namespace {
bool wgmma_data_leaves_to_mma_sync(const Conv2dGeometry& g) {
  const bool one_by_one = g.R == 1 && g.S == 1;
  if (!one_by_one) return g.C / g.groups <= 8;
  return std::min(g.C, g.K) / g.groups < 40 &&
         !tc::wgmma_backward_data_takes_stream(g, tc::WgmmaLaunch::automatic);
}
}  // namespace

bool conv2d_tc_backward_data_uses_wgmma(const Conv2dGeometry& g, TcKernels kernels) {
  if (!wgmma_allowed(kernels) || !tc::wgmma_backward_data_fits(g) || !detail::device_is_sm90()) {
    return false;
  }
  return kernels != TcKernels::best || !wgmma_data_leaves_to_mma_sync(g);
}

bool conv2d_tc_forward_uses_halo(const Conv2dGeometry& g, TcKernels kernels, bool f32) {
  const bool wgmma = f32 ? conv2d_forward_nhwc_uses_wgmma(g, GemmMath::tf32, kernels)
                         : conv2d_tc_forward_uses_wgmma(g, kernels);
  return wgmma && tc::wgmma_forward_takes_halo(g, tc::wgmma_launch(kernels), f32 ? 4 : 8);
}

bool conv2d_tc_backward_data_uses_halo(const Conv2dGeometry& g, TcKernels kernels, bool f32) {
  const bool wgmma = f32 ? conv2d_backward_data_nhwc_uses_wgmma(g, GemmMath::tf32, kernels)
                         : conv2d_tc_backward_data_uses_wgmma(g, kernels);
  return wgmma && tc::wgmma_backward_data_takes_halo(g, tc::wgmma_launch(kernels), f32 ? 4 : 8);
}

bool conv2d_tc_forward_uses_stream(const Conv2dGeometry& g, TcKernels kernels, bool f32) {
  const bool wgmma = f32 ? conv2d_forward_nhwc_uses_wgmma(g, GemmMath::tf32, kernels)
                         : conv2d_tc_forward_uses_wgmma(g, kernels);
  return wgmma && tc::wgmma_forward_takes_stream(g, tc::wgmma_launch(kernels), false, f32 ? 4 : 8);
}

bool conv2d_tc_backward_data_uses_stream(const Conv2dGeometry& g, TcKernels kernels, bool f32) {
  const bool wgmma = f32 ? conv2d_backward_data_nhwc_uses_wgmma(g, GemmMath::tf32, kernels)
                         : conv2d_tc_backward_data_uses_wgmma(g, kernels);
  return wgmma && tc::wgmma_backward_data_takes_stream(g, tc::wgmma_launch(kernels), f32 ? 4 : 8);
}

// bf16 only: cuda::gemm_bf16 is the one 16-bit GEMM on 16-bit operands (wgmma, sm_90).
// `best` takes col2im for filters of 25 taps and more only: on 3x3 stems the implicit GEMM wins
// (H200, 2026-11-27, session 17's bf16 suite: 8,3,224,224 -> 64 3x3 col2im 0.220 ms against
// mma.sync's 0.170; 16,3,224,224 -> 32 3x3 s2 0.148 against 0.097; 7x7 0.406 against 0.439,
// 11x11 0.385 against 0.391).
namespace {

// Whether col2im can run g (bf16 on compute capability 9.0) and `best` would take it over the
// implicit GEMM: filters of 25 taps and more, onto at most 8 channels or from K not a whole
// 16-byte vector (mma.sync's element loads of dy): H200, 2026-11-28, `crema bench conv-tc`:
// LeNet's 20 <- 50 col2im 0.102 ms, mma.sync 0.219; 64,20,24,24 -> 64 5x5 col2im 0.200,
// mma.sync 0.070.
bool col2im_pays(const Conv2dGeometry& g, TcType type) {
  return type == TcType::bf16 && g.R * g.S >= 25 && (g.C <= 8 || g.K % 8 != 0) &&
         col2im_nhwc::fits(g, 8) && detail::device_is_sm90();
}

}  // namespace

bool conv2d_tc_backward_data_uses_col2im(const Conv2dGeometry& g, TcType type, TcKernels kernels) {
  if (kernels == TcKernels::col2im) {
    return type == TcType::bf16 && col2im_nhwc::fits(g, 8) && detail::device_is_sm90();
  }
  return kernels == TcKernels::best && col2im_pays(g, type) &&
         !conv2d_tc_backward_data_uses_direct(g, type) &&
         !conv2d_tc_backward_data_uses_direct_mma(g, type);
}

// `best` takes the direct kernel where the channels are not a whole 16-byte vector and either
// at most 8 of them, or K not a whole vector either (mma.sync's element loads) where col2im does
// not run. H200, 2026-11-28, `crema bench conv-tc`, bf16: the 3-channel stem at batch 64 direct
// 0.86 ms, col2im 1.61; VGG's 3 channels 0.089, mma.sync 0.170; but 12 channels from 32 (3x3)
// direct 0.035, mma.sync 0.023; 20 from 64 (5x5) 0.127 against 0.070; LeNet's 20 from 50:
// direct 0.147, col2im 0.102, mma.sync 0.219 (fp16, no col2im: direct).
bool few_channels_direct_pays(const Conv2dGeometry& g, bool col2im, int vector) {
  return g.C % vector != 0 && (g.C <= 8 || (g.K % vector != 0 && !col2im));
}

bool conv2d_tc_backward_data_uses_direct(const Conv2dGeometry& g, TcType type, TcKernels kernels) {
  const bool allowed =
      kernels == TcKernels::direct ||
      (kernels == TcKernels::best && few_channels_direct_pays(g, col2im_pays(g, type), 8) &&
       !conv2d_tc_backward_data_uses_direct_mma(g, type));
  return allowed && !g.depthwise() && few_channels_nhwc::fits(g);
}

// `best` takes the few-channel kernel on mma.sync where it fits a filter with taps onto 8
// channels or more, those not a whole number of 8 or at most two 16-byte vectors (16 16-bit
// channels, 8 floats): from there the halo tiles and the implicit GEMMs win; and a 1x1 (a plain
// GEMM) only where the channels are not whole vectors. H200, 2026-11-29, `crema bench conv-tc
// [--math tf32]`, bf16 / tf32 ms, this kernel against `best` before: LeNet's 20 <- 50 5x5 at N 256
// 0.037 (col2im 0.102) / 0.064 (mma.sync 0.185); 64,12,32,32 <- 32 3x3 0.015 (mma.sync 0.023) /
// 0.021 (halo 0.033); 32,8,56,56 <- 32 3x3 0.018 (mma.sync 0.030) / 0.032 (0.035); 64,16,28,28
// <- 32 3x3 0.018 (halo 0.026) / 0.029 (halo 0.024); 64,32,28,28 <- 64 3x3 0.039 (halo 0.020) /
// 0.034 (0.032); on 3 channels the CUDA cores' direct kernel (VGG's 8,3,224,224 <- 64: 0.089
// against 0.108).
bool few_channels_mma_pays(const Conv2dGeometry& g, int vector) {
  if (g.C < 8) return false;
  if (g.R * g.S == 1) return g.C % vector != 0;
  return g.C % 8 != 0 || g.C <= 2 * vector;
}

bool conv2d_tc_backward_data_uses_direct_mma(const Conv2dGeometry& g, TcType type,
                                             TcKernels kernels) {
  const bool allowed = kernels == TcKernels::direct_mma ||
                       (kernels == TcKernels::best && few_channels_mma_pays(g, 8));
  return allowed && !g.depthwise() && few_channels_mma::fits(g, depthwise_nhwc::element_of(type));
}

// `best` takes the few-input-channel kernels wherever they fit (at most 8 input channels; the
// filter gradient's takes fewer than 8). The filter gradient's against mma.sync on x padded to 8
// channels: ResNet's 64,3,224,224 -> 64 7x7s2 0.130 ms against 0.258 (H200, 2026-11-29, session
// 30, calls 7 and 1, `crema bench conv-tc --shape "resnet 7x7s2 3->64 224x224 n64"`).
bool stem_mma_pays(const Conv2dGeometry& g) {
  return g.C <= 8;
}

namespace {
bool stem_allowed(const Conv2dGeometry& g, TcKernels kernels) {
  return (kernels == TcKernels::stem_mma || (kernels == TcKernels::best && stem_mma_pays(g))) &&
         !g.depthwise();
}
}  // namespace

bool conv2d_tc_forward_uses_stem(const Conv2dGeometry& g, TcKernels kernels) {
  return stem_allowed(g, kernels) && stem_mma::fits(g);
}

bool conv2d_tc_backward_filter_uses_stem(const Conv2dGeometry& g, TcKernels kernels) {
  return stem_allowed(g, kernels) && stem_mma::backward_filter_fits(g);
}

// `best` takes the grouped direct kernels where the pass reads few channels a group: the
// forward at Cg = 4, or 8 at stride 1; backward data at Kg <= 8; the filter gradient at Cg = 4;
// the implicit GEMMs (one group's Kg columns on a tile of 64 or more) elsewhere. H200,
// 2026-11-29, `crema bench conv-tc --math bf16` (session 26's ninth device call), ms, this
// kernel against mma.sync's, forward / data / filter: ResNeXt-50's 4 x 4 groups at 56
// (16,128,56,56 -> 128 3x3, 32 groups) 0.030 / 0.031 / 0.066 against 0.376 / 0.412 / 0.701;
// 8 x 8 at 28 0.040 / 0.041 / 0.057 against 0.047 / 0.055 / 0.059; 8 x 8 at stride 2 0.059 /
// 0.074 / 0.071 against 0.050 / 0.138 / 0.059; 16 x 16 at 14 0.044 / 0.051 / 0.048 against
// 0.021 / 0.028 / 0.032 (MEASUREMENTS.md, "Grouped convolutions with few channels a group").
namespace {
bool grouped_allowed(const Conv2dGeometry& g, TcKernels kernels, bool pays) {
  return (kernels == TcKernels::grouped || (kernels == TcKernels::best && pays)) &&
         grouped_nhwc::fits(g);
}
}  // namespace

bool conv2d_tc_forward_uses_grouped(const Conv2dGeometry& g, TcKernels kernels) {
  const bool one = g.stride_h == 1 && g.stride_w == 1;
  return grouped_allowed(g, kernels, g.C == 4 * g.groups || (g.C == 8 * g.groups && one));
}

bool conv2d_tc_backward_data_uses_grouped(const Conv2dGeometry& g, TcKernels kernels) {
  return grouped_allowed(g, kernels, g.K <= 8 * g.groups);
}

bool conv2d_tc_backward_filter_uses_grouped(const Conv2dGeometry& g, TcKernels kernels) {
  return grouped_allowed(g, kernels, g.C == 4 * g.groups);
}

}  // namespace crema::kernels::cuda
