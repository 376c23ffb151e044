// 2-D convolution on the GPU: the cuda:: entry points and their version switch, v1, and the bias
// gradient. README.md has the ladder and its measurements.
//
// v1 im2col_gemm    per group: im2col of the whole batch into col[CRS, N*PQ] (workspace), one
//                   cuda::sgemm, and a reorder between the GEMM's [Kg, N*PQ] and NKPQ (bias added
//                   there); backward data ends in a gather col2im. col goes through memory twice
//                   per pass (CRS*N*PQ floats: 33 MB for LeNet's conv2 at N = 64), plus reorders.
// v2 implicit_gemm  one tiled GEMM kernel per pass that gathers its patch (or dy) tiles straight
//                   into shared memory (convolution_implicit_gemm*_cuda.cu): no col, bias in the
//                   epilogue, the filter gradient split over N*P*Q and summed by a second kernel
//                   together with the bias gradient.
// v3 pointwise_gemm pointwise geometries: forward and backward data are per-image plain GEMMs
//                   over x, y, dy, dx in place, all images in one launch
//                   (convolution_pointwise_cuda.cu); the filter gradient is v2's.
// v4 depthwise_direct depthwise geometries: direct loops over the R*S taps, no GEMM
//                   (convolution_depthwise_cuda.cu).
// v5 winograd_2x2   3x3 stride-1 geometries: Winograd F(2x2,3x3); filter and tile transforms into
//                   the workspace, 16 batched GEMMs, output transform; backward data the same on dy
//                   with the filter rotated; filter gradient F(3x3,2x2) (convolution_winograd*).
// v6 winograd_4x4   v5 with F(4x4,3x3): 36 GEMMs over 4x fewer (6x6) tiles.
// v7 direct         forward and backward data as direct loops over the taps, for few channels
//                   (convolution_direct_cuda.cu); the filter gradient is v2's.
// v8 precomputed_gemm v2 with the inner index's offsets read from a table in the workspace
//                   (convolution_implicit_gemm_cuda.cu); the filter gradient is v2's.
// v9 nhwc_implicit_gemm every pass through the NHWC kernels, with layout transforms around them
//                   (convolution_nhwc_version_cuda.cu, convolution_nhwc_cuda.cu).
// v10 fft           stride-1 ungrouped geometries with padded maps up to 64x64: half spectra of the
//                   maps in the workspace, a batched complex GEMM per bin, inverse FFT with the
//                   crop (convolution_fft_cuda.cu).
//
// Every kernel is deterministic: each output is summed by one thread (or one block, in a fixed
// tree), in an order fixed by the geometry; no atomics. In tf32 and bf16 the passes that have a
// tensor-core path (computes_in: v1 through cuda::sgemm's math, v3, v5, and v2's and v8's three
// passes through convolution_mma.cuh) run it; every other pass runs its fp32 code unchanged.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_cuda_internal.h"
#include "kernels/convolution/convolution_nhwc_internal.h"
#include "kernels/gemm/gemm.h"
#include "kernels/im2col/im2col.h"

namespace crema::kernels::cuda {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t count) {
  return int(std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, 65536));
}

// dst[k, n*PQ + pq] = src[n, k0 + k, pq] for k < Kg: one group's channels of an NKPQ tensor laid
// out as the GEMM's [Kg, N*PQ] matrix.
__global__ void channels_to_rows(const float* __restrict__ src, int N, int K, int k0, int Kg,
                                 int PQ, float* __restrict__ dst) {
  const int64_t NPQ = int64_t(N) * PQ, total = Kg * NPQ;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / NPQ, j = i % NPQ, n = j / PQ, pq = j % PQ;
    dst[i] = src[(n * K + k0 + k) * PQ + pq];
  }
}

// dst[n, k0 + k, pq] = src[k, n*PQ + pq] + bias[k0 + k] (no bias when null): the inverse.
__global__ void rows_to_channels(const float* __restrict__ src, const float* __restrict__ bias,
                                 int N, int K, int k0, int Kg, int PQ, float* __restrict__ dst) {
  const int64_t NPQ = int64_t(N) * PQ, total = Kg * NPQ;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / NPQ, j = i % NPQ, n = j / PQ, pq = j % PQ;
    dst[(n * K + k0 + k) * PQ + pq] = src[i] + (bias != nullptr ? bias[k0 + k] : 0.0f);
  }
}

// y[n, c, i] += bias[c] for y [N, C, HW].
__global__ void add_channel_bias_kernel(const float* __restrict__ bias, int64_t C, int64_t HW,
                                        int64_t total, float* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] += bias[i / HW % C];
  }
}

// db[k] += sum over (n, pq) of dy[n, k, pq]. Block k: thread t sums positions t, t + 256, ...
// in order, then the block adds the 256 sums in a fixed tree.
__global__ void bias_gradient_kernel(const float* __restrict__ dy, int N, int K, int PQ,
                                     float* __restrict__ db) {
  __shared__ float sums[kThreads];
  const int k = blockIdx.x, t = threadIdx.x;
  float sum = 0.0f;
  for (int64_t i = t; i < int64_t(N) * PQ; i += kThreads) {
    sum += dy[(i / PQ * K + k) * PQ + i % PQ];
  }
  sums[t] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) sums[t] += sums[t + stride];
    __syncthreads();
  }
  if (t == 0) db[k] += sums[0];
}

// Sizes of one group's GEMMs.
struct GroupGemm {
  int64_t Cg, Kg, CRS, PQ, NPQ, HW;
  explicit GroupGemm(const Conv2dGeometry& g)
      : Cg(g.C / g.groups),
        Kg(g.K / g.groups),
        CRS(Cg * g.R * g.S),
        PQ(g.P() * g.Q()),
        NPQ(g.N * PQ),
        HW(g.H * g.W) {}
};

// v1 needs col [CRS, N*PQ] and the GEMM's [Kg, N*PQ] side by side.
size_t im2col_gemm_workspace(const Conv2dGeometry& g) {
  const GroupGemm s(g);
  return size_t((s.CRS + s.Kg) * s.NPQ);
}

void forward_im2col_gemm(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, gpu::Stream stream, GemmMath math) {
  const GroupGemm s(g);
  float* col = workspace;                  // [CRS, N*PQ]
  float* out = workspace + s.CRS * s.NPQ;  // [Kg, N*PQ]
  for (int64_t group = 0; group < g.groups; ++group) {
    im2col(g.group_patches(), g.N, x + group * s.Cg * s.HW, g.C * s.HW, col, s.NPQ, stream);
    sgemm(false, false, s.Kg, s.NPQ, s.CRS, 1.0f, w + group * s.Kg * s.CRS, s.CRS, col, s.NPQ, 0.0f,
          out, s.NPQ, stream, best_version(math), math);
    rows_to_channels<<<grid_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
        out, bias, int(g.N), int(g.K), int(group * s.Kg), int(s.Kg), int(s.PQ), y);
    gpu::check_launch("conv2d_forward (im2col + GEMM: reorder)");
  }
}

void backward_data_im2col_gemm(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, gpu::Stream stream, GemmMath math) {
  const GroupGemm s(g);
  float* dyk = workspace;                                 // [Kg, N*PQ]
  float* dcol = workspace + s.Kg * s.NPQ;                 // [CRS, N*PQ]
  gpu::fill(dx, size_t(g.N * g.C * s.HW), 0.0f, stream);  // col2im accumulates
  for (int64_t group = 0; group < g.groups; ++group) {
    channels_to_rows<<<grid_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
        dy, int(g.N), int(g.K), int(group * s.Kg), int(s.Kg), int(s.PQ), dyk);
    gpu::check_launch("conv2d_backward_data (im2col + GEMM: reorder)");
    sgemm(true, false, s.CRS, s.NPQ, s.Kg, 1.0f, w + group * s.Kg * s.CRS, s.CRS, dyk, s.NPQ, 0.0f,
          dcol, s.NPQ, stream, best_version(math), math);
    col2im(g.group_patches(), g.N, dcol, s.NPQ, dx + group * s.Cg * s.HW, g.C * s.HW, stream);
  }
}

void backward_filter_im2col_gemm(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* db, float* workspace, gpu::Stream stream,
                                 GemmMath math) {
  const GroupGemm s(g);
  float* col = workspace;                  // [CRS, N*PQ]
  float* dyk = workspace + s.CRS * s.NPQ;  // [Kg, N*PQ]
  for (int64_t group = 0; group < g.groups; ++group) {
    im2col(g.group_patches(), g.N, x + group * s.Cg * s.HW, g.C * s.HW, col, s.NPQ, stream);
    channels_to_rows<<<grid_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
        dy, int(g.N), int(g.K), int(group * s.Kg), int(s.Kg), int(s.PQ), dyk);
    gpu::check_launch("conv2d_backward_filter (im2col + GEMM: reorder)");
    sgemm(false, true, s.Kg, s.CRS, s.NPQ, 1.0f, dyk, s.NPQ, col, s.NPQ, 1.0f,
          dw + group * s.Kg * s.CRS, s.CRS, stream, best_version(math), math);
  }
  if (db != nullptr) conv2d_backward_bias(g, dy, db, stream);
}

[[noreturn]] void unknown_version(ConvVersion version) {
  throw Error("conv2d on CUDA: unknown version " + std::to_string(int(version)));
}

// What a version that does not run every geometry needs.
const char* requirement(ConvVersion version) {
  switch (version) {
    case ConvVersion::pointwise_gemm:
      return "a 1x1 filter with stride 1 and no padding";
    case ConvVersion::depthwise_direct:
      return "one input channel per group (C == groups > 1)";
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return "a 3x3 filter with stride 1 and dilation 1 (backward data: padding at most 2)";
    case ConvVersion::direct:
      return "filters of at most 16x16 taps and strides of at most 4";
    case ConvVersion::fft:
      return "stride 1, dilation 1, groups 1 and padded maps of at most 64x64";
    default:
      return "a supported geometry";
  }
}

// Throws crema::Error when `version` cannot run `pass` of geometry g; checks the sizes for
// 32-bit indexing.
void check_version(const char* op, ConvVersion version, ConvPass pass, const Conv2dGeometry& g) {
  implicit_gemm::check_sizes(g);
  if (!supports(version, pass, g)) {
    throw Error(std::string(op) + " on CUDA: version " + conv_version_name(version) + " needs " +
                requirement(version));
  }
}

// The math `version` computes `pass` in when asked for `math` (computes_in: fp32 where it has no
// other).
GemmMath own_math(ConvVersion version, ConvPass pass, GemmMath math) {
  return computes_in(version, pass, math) ? math : GemmMath::fp32;
}

// The output tile side of a Winograd version.
int winograd_tile(ConvVersion version) {
  return version == ConvVersion::winograd_2x2 ? 2 : 4;
}

}  // namespace

namespace {
// Winograd F(4x4,3x3) where it was measured to win (H200, README.md: ResNet's 3x3 layers with 64
// to 256 channels, every pass 2.4-3.9x faster than v2): 3x3 stride-1 geometries whose groups
// have at least 32 input and output channels (the batched GEMMs' inner dimension and rows).
bool winograd_pays(ConvPass pass, const Conv2dGeometry& g) {
  return supports(ConvVersion::winograd_4x4, pass, g) && g.C / g.groups >= 32 &&
         g.K / g.groups >= 32;
}

// FFT (v10) in fp32 (H200, README.md "FFT"): 5x5 and larger filters with at least 64 input and
// output channels on padded maps of 32 x 32 or less, where its per-bin products do 9-15x fewer
// operations than the direct sum: every pass 0.27-0.76x the best other version on five such
// layers. Not at F = 64 (a 32x32 map with pad 3: 1.2-1.3x behind v9), nor with few channels
// (LeNet's 20 -> 50: 1.35-2.7x), nor on 3x3 filters (Winograd F(4x4,3x3): 2.1-4.1x faster).
bool fft_pays(const Conv2dGeometry& g) {
  return supports(ConvVersion::fft, g) && g.R >= 5 && g.S >= 5 && g.C >= 64 && g.K >= 64 &&
         g.H + 2 * g.pad_h <= 32 && g.W + 2 * g.pad_w <= 32;
}

// The Winograd version of a 3x3 stride-1 layer in tf32 / bf16 (H200, README.md "The heuristic in
// tf32 and bf16"): forward and backward data run v5 on tensor cores from 256 channels a group
// (its 16 GEMMs are then large enough that the tensor cores beat v6's 4x fewer FFMA multiplies:
// 0.12 against 0.13 ms at 256 channels 8x8, 0.11 against 0.16 ms at 512 4x4), v6 in fp32 below
// (0.155 against v5's 0.263 ms at 64 channels 32x32); the filter gradient v6 (fp32) at every
// size measured (its F(3x3,2x2) in v5 pays the transforms of x and dy at full resolution).
ConvVersion tensor_winograd(ConvPass pass, const Conv2dGeometry& g) {
  const bool wide = std::min(g.C, g.K) / g.groups >= 256;
  return pass != ConvPass::backward_filter && wide ? ConvVersion::winograd_2x2
                                                   : ConvVersion::winograd_4x4;
}
}  // namespace

ConvVersion forward_version(const Conv2dGeometry& g, GemmMath math) {
  if (g.depthwise()) return ConvVersion::depthwise_direct;
  if (g.pointwise()) return ConvVersion::pointwise_gemm;
  if (math == GemmMath::fp32) {
    if (fft_pays(g)) return ConvVersion::fft;
    return winograd_pays(ConvPass::forward, g) ? ConvVersion::winograd_4x4
                                               : ConvVersion::implicit_gemm;
  }
  if (winograd_pays(ConvPass::forward, g)) return tensor_winograd(ConvPass::forward, g);
  // Tensor cores: v9's cp.async pipeline from 16 channels a group (3x3 stride 2: 0.09-0.13 ms
  // against v2's 0.15-0.26), v2 for 1x1 filters (its patch loader is then a strided copy: 0.03
  // ms against v9's 0.05-0.07, whose transposes cost more than the GEMM) and few channels (a
  // 3-channel stem: 0.035 against 0.085).
  if (g.R * g.S > 1 && g.C / g.groups >= 16) return ConvVersion::nhwc_implicit_gemm;
  return ConvVersion::implicit_gemm;
}

ConvVersion backward_data_version(const Conv2dGeometry& g, GemmMath math) {
  if (g.depthwise()) return ConvVersion::depthwise_direct;
  if (g.pointwise()) return ConvVersion::pointwise_gemm;
  if (math == GemmMath::fp32 && fft_pays(g)) return ConvVersion::fft;
  if (winograd_pays(ConvPass::backward_data, g)) {
    return math == GemmMath::fp32 ? ConvVersion::winograd_4x4
                                  : tensor_winograd(ConvPass::backward_data, g);
  }
  if (g.C / g.groups < 32) return ConvVersion::im2col_gemm;
  if (math == GemmMath::fp32) return ConvVersion::implicit_gemm;
  // Tensor cores: v2's gather reads mostly zeros at stride 2 (0.70-0.86 ms); v1 (im2col + the
  // tf32 GEMM + col2im) wins on 8x8 maps and smaller (0.16 against v9's 0.24 ms), v9 above.
  return g.H * g.W <= 64 ? ConvVersion::im2col_gemm : ConvVersion::nhwc_implicit_gemm;
}

ConvVersion backward_filter_version(const Conv2dGeometry& g, GemmMath math) {
  // The same in every math but for FFT (measured in fp32 only): in tf32 v6 (fp32) still beats v5
  // and v2 on tensor cores for 3x3 layers, and v2's split GEMM is within 10% of the fastest
  // elsewhere (README.md).
  if (g.depthwise()) return ConvVersion::depthwise_direct;
  if (math == GemmMath::fp32 && fft_pays(g)) return ConvVersion::fft;
  if (winograd_pays(ConvPass::backward_filter, g)) return ConvVersion::winograd_4x4;
  return ConvVersion::implicit_gemm;
}

size_t conv2d_forward_workspace(const Conv2dGeometry& g, ConvVersion version) {
  switch (version) {
    case ConvVersion::im2col_gemm:
      return im2col_gemm_workspace(g);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return supports(version, ConvPass::forward, g)
                 ? winograd::forward_workspace(g, winograd_tile(version))
                 : 0;
    case ConvVersion::direct:
      return supports(version, g) ? direct::workspace(g, false) : 0;
    case ConvVersion::precomputed_gemm:
      return implicit_gemm::precomputed_workspace(g, false);
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::forward_workspace(g);
    case ConvVersion::fft:
      return fft::workspace(g, ConvPass::forward);
    default:
      return 0;
  }
}

size_t conv2d_backward_data_workspace(const Conv2dGeometry& g, ConvVersion version) {
  switch (version) {
    case ConvVersion::im2col_gemm:
      return im2col_gemm_workspace(g);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return supports(version, ConvPass::backward_data, g)
                 ? winograd::backward_data_workspace(g, winograd_tile(version))
                 : 0;
    case ConvVersion::direct:
      return supports(version, g) ? direct::workspace(g, true) : 0;
    case ConvVersion::precomputed_gemm:
      return implicit_gemm::precomputed_workspace(g, true);
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::backward_data_workspace(g);
    case ConvVersion::fft:
      return fft::workspace(g, ConvPass::backward_data);
    default:
      return 0;
  }
}

size_t conv2d_backward_filter_workspace(const Conv2dGeometry& g, bool with_bias,
                                        ConvVersion version) {
  switch (version) {
    case ConvVersion::im2col_gemm:
      return im2col_gemm_workspace(g);
    case ConvVersion::depthwise_direct:
      return depthwise::backward_filter_workspace(g, with_bias);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return supports(version, ConvPass::backward_filter, g)
                 ? winograd::backward_filter_workspace(g, winograd_tile(version))
                 : 0;
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::backward_filter_workspace(g);
    case ConvVersion::fft:
      return fft::workspace(g, ConvPass::backward_filter);
    default:  // v3, v7 and v8 run v2's filter gradient
      return implicit_gemm::backward_filter_workspace(g, with_bias);
  }
}

void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, float* workspace, gpu::Stream stream, ConvVersion version,
                    GemmMath math) {
  check_version("conv2d_forward", version, ConvPass::forward, g);
  switch (version) {
    case ConvVersion::im2col_gemm:
      return forward_im2col_gemm(g, x, w, bias, y, workspace, stream, math);
    case ConvVersion::implicit_gemm:
      return implicit_gemm::forward(g, x, w, bias, y, stream, math);
    case ConvVersion::pointwise_gemm:
      return pointwise::forward(g, x, w, bias, y, stream, math);
    case ConvVersion::depthwise_direct:
      return depthwise::forward(g, x, w, bias, y, stream);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return winograd::forward(g, winograd_tile(version), x, w, bias, y, workspace, stream,
                               own_math(version, ConvPass::forward, math));
    case ConvVersion::direct:
      return direct::forward(g, x, w, bias, y, workspace, stream);
    case ConvVersion::precomputed_gemm:
      return implicit_gemm::forward_precomputed(g, x, w, bias, y, workspace, stream, math);
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::forward(g, x, w, bias, y, workspace, stream, math);
    case ConvVersion::fft:
      return fft::forward(g, x, w, bias, y, workspace, stream);
  }
  unknown_version(version);
}

void conv2d_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                          float* workspace, gpu::Stream stream, ConvVersion version,
                          GemmMath math) {
  check_version("conv2d_backward_data", version, ConvPass::backward_data, g);
  switch (version) {
    case ConvVersion::im2col_gemm:
      return backward_data_im2col_gemm(g, dy, w, dx, workspace, stream, math);
    case ConvVersion::implicit_gemm:
      return implicit_gemm::backward_data(g, dy, w, dx, stream, math);
    case ConvVersion::pointwise_gemm:
      return pointwise::backward_data(g, dy, w, dx, stream, math);
    case ConvVersion::depthwise_direct:
      return depthwise::backward_data(g, dy, w, dx, stream);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return winograd::backward_data(g, winograd_tile(version), dy, w, dx, workspace, stream,
                                     own_math(version, ConvPass::forward, math));
    case ConvVersion::direct:
      return direct::backward_data(g, dy, w, dx, workspace, stream);
    case ConvVersion::precomputed_gemm:
      return implicit_gemm::backward_data_precomputed(g, dy, w, dx, workspace, stream, math);
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::backward_data(g, dy, w, dx, workspace, stream, math);
    case ConvVersion::fft:
      return fft::backward_data(g, dy, w, dx, workspace, stream);
  }
  unknown_version(version);
}

void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, float* workspace, gpu::Stream stream, ConvVersion version,
                            GemmMath math) {
  check_version("conv2d_backward_filter", version, ConvPass::backward_filter, g);
  switch (version) {
    case ConvVersion::im2col_gemm:
      return backward_filter_im2col_gemm(g, x, dy, dw, db, workspace, stream, math);
    case ConvVersion::implicit_gemm:
    case ConvVersion::pointwise_gemm:
    case ConvVersion::direct:
    case ConvVersion::precomputed_gemm:
      return implicit_gemm::backward_filter(g, x, dy, dw, db, workspace, stream, math);
    case ConvVersion::depthwise_direct:
      return depthwise::backward_filter(g, x, dy, dw, db, workspace, stream);
    case ConvVersion::winograd_2x2:
    case ConvVersion::winograd_4x4:
      return winograd::backward_filter(g, winograd_tile(version), x, dy, dw, db, workspace, stream,
                                       own_math(version, ConvPass::forward, math));
    case ConvVersion::nhwc_implicit_gemm:
      return nhwc_version::backward_filter(g, x, dy, dw, db, workspace, stream, math);
    case ConvVersion::fft:
      return fft::backward_filter(g, x, dy, dw, db, workspace, stream);
  }
  unknown_version(version);
}

void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, gpu::Stream stream) {
  implicit_gemm::check_sizes(g);
  channel_bias_gradient(g.N, g.K, g.P() * g.Q(), dy, db, stream);
}

void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      gpu::Stream stream) {
  const int64_t total = N * C * HW;
  if (total == 0) return;
  add_channel_bias_kernel<<<grid_for(total), kThreads, 0, stream>>>(bias, C, HW, total, y);
  gpu::check_launch("add_channel_bias");
}

void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           gpu::Stream stream) {
  if (C == 0) return;
  if (N * C * HW >= INT32_MAX) {
    throw Error(
        "channel_bias_gradient on CUDA: tensors of 2^31 elements or more are not "
        "supported (dy has " +
        std::to_string(N * C * HW) + ")");
  }
  bias_gradient_kernel<<<unsigned(C), kThreads, 0, stream>>>(dy, int(N), int(C), int(HW), db);
  gpu::check_launch("channel_bias_gradient");
}

}  // namespace crema::kernels::cuda
