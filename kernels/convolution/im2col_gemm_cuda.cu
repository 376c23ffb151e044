// Convolution v1, im2col_gemm: per group, im2col of the whole batch into col[CRS, N*PQ]
// (workspace), one cuda::sgemm, and a reorder between the GEMM's [Kg, N*PQ] and NKPQ (bias added
// there); backward data ends in a gather col2im. col goes through memory twice per pass
// (CRS*N*PQ floats: 33 MB for LeNet's conv2 at N = 64), plus reorders. Every geometry; every
// math (its products are cuda::sgemm calls in that math; im2col, col2im and the reorders stay
// fp32).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution.h"
#include "kernels/gemm/gemm.h"
#include "kernels/im2col/im2col.h"

namespace crema::kernels::cuda {
namespace {

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
    im2col(g.group_patches(), g.N, x + group * s.Cg * s.HW, g.C * s.HW, col, s.NPQ,
           Im2colVersion::best, stream);
    sgemm(false, false, s.Kg, s.NPQ, s.CRS, 1.0f, w + group * s.Kg * s.CRS, s.CRS, col, s.NPQ, 0.0f,
          out, s.NPQ, stream, best_version(math), math);
    rows_to_channels<<<blocks_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
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
    channels_to_rows<<<blocks_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
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
    im2col(g.group_patches(), g.N, x + group * s.Cg * s.HW, g.C * s.HW, col, s.NPQ,
           Im2colVersion::best, stream);
    channels_to_rows<<<blocks_for(s.Kg * s.NPQ), kThreads, 0, stream>>>(
        dy, int(g.N), int(g.K), int(group * s.Kg), int(s.Kg), int(s.PQ), dyk);
    gpu::check_launch("conv2d_backward_filter (im2col + GEMM: reorder)");
    sgemm(false, true, s.Kg, s.CRS, s.NPQ, 1.0f, dyk, s.NPQ, col, s.NPQ, 1.0f,
          dw + group * s.Kg * s.CRS, s.CRS, stream, best_version(math), math);
  }
  if (db != nullptr) conv2d_backward_bias(g, dy, db, stream);
}

size_t workspace(ConvPass, const Conv2dGeometry& g, bool) {
  return im2col_gemm_workspace(g);
}

}  // namespace
}  // namespace crema::kernels::cuda

namespace crema::kernels::records {

extern const ConvAlgorithm im2col_gemm{"im2col_gemm",
                                       1,
                                       DType::f32,
                                       Layout::nchw,
                                       supports_every_geometry,
                                       "any geometry",
                                       computes_in_every_math,
                                       cuda::workspace,
                                       cuda::forward_im2col_gemm,
                                       cuda::backward_data_im2col_gemm,
                                       cuda::backward_filter_im2col_gemm};

}  // namespace crema::kernels::records
