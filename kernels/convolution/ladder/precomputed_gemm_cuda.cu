// Convolution v8 (a ladder rung), precomputed_gemm: v2 (../convolution_implicit_gemm_kernels.cuh,
// instantiated here with PRECOMPUTED = true) whose loaders read each inner index's offsets from a
// table instead of dividing. Where v2 splits every inner index (c,r,s) or (k,r,s) with two fast
// divisions per loaded element, v8 reads it from a table built once per call in the workspace,
//
//   forward  table[(c,r,s)] = {c*H*W + r*dil_h*W + s*dil_w, r*dil_h, s*dil_w}
//   data     table[(k,r,s)] = {k*P*Q, r*dil_h, s*dil_w}
//
// one 16-byte load that every thread of a row shares (an L1 broadcast). The filter gradient is
// v2's. Every math, as v2. Production never picks it (../README.md has its measurements).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_implicit_gemm_kernels.cuh"

namespace crema::kernels::cuda::implicit_gemm {
namespace {

__global__ void offset_table_kernel(ConvParams p, bool data, int4* __restrict__ table) {
  const int rows = data ? p.Kg * p.RS : p.CRS;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += gridDim.x * blockDim.x) {
    int channel, rs, r, s;
    p.by_RS.divmod(i, channel, rs);
    p.by_S.divmod(rs, r, s);
    const int dh = r * p.dilation_h, dw = s * p.dilation_w;
    table[i] = make_int4(data ? channel * p.PQ : channel * p.HW + dh * p.W + dw, dh, dw, 0);
  }
}

const int4* build_table(const ConvParams& p, bool data, float* workspace, gpu::Stream stream) {
  int4* table = reinterpret_cast<int4*>(workspace);
  const int rows = data ? p.Kg * p.RS : p.CRS;
  offset_table_kernel<<<unsigned(std::min(4096, (rows + 255) / 256)), 256, 0, stream>>>(p, data,
                                                                                        table);
  gpu::check_launch("conv2d (precomputed implicit GEMM: offset table)");
  return table;
}

// Floats of the table: one int4 (four floats' bytes) per inner index of the pass's GEMM.
size_t precomputed_workspace(const Conv2dGeometry& g, bool data) {
  return size_t(4 * (data ? g.K / g.groups : g.C / g.groups) * g.R * g.S);
}

void forward_precomputed(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, gpu::Stream stream, GemmMath math) {
  const ConvParams p = params_of(g);
  run_forward<true>(g, p, build_table(p, false, workspace, stream), x, w, bias, y, stream, math);
}

void backward_data_precomputed(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, gpu::Stream stream, GemmMath math) {
  const ConvParams p = params_of(g);
  run_backward_data<true>(g, p, build_table(p, true, workspace, stream), dy, w, dx, stream, math);
}

}  // namespace
}  // namespace crema::kernels::cuda::implicit_gemm

namespace crema::kernels::records {

extern const ConvAlgorithm precomputed_gemm{
    "precomputed_gemm",
    8,
    DType::f32,
    Layout::nchw,
    supports_every_geometry,
    "any geometry",
    computes_in_every_math,
    [](ConvPass pass, const Conv2dGeometry& g, bool with_bias) -> size_t {
      if (pass == ConvPass::backward_filter) {
        return cuda::implicit_gemm::backward_filter_workspace(g, with_bias);
      }
      return cuda::implicit_gemm::precomputed_workspace(g, pass == ConvPass::backward_data);
    },
    cuda::implicit_gemm::forward_precomputed,
    cuda::implicit_gemm::backward_data_precomputed,
    cuda::implicit_gemm::backward_filter};

}  // namespace crema::kernels::records
