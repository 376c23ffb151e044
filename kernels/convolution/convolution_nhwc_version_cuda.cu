// v9 nhwc_implicit_gemm: an NCHW convolution run by the NHWC kernels (convolution_nhwc_cuda.cu).
// Each pass transposes its inputs into the workspace (x, dy: NCHW -> NHWC, a batched transpose of
// [N, C, H*W]; w: KCRS -> KRSC, of [K, Cg, R*S]), runs the NHWC pass, and transposes its result
// back (y, dx: NHWC -> NCHW). The filter gradient accumulates, so dw goes KCRS -> KRSC, receives
// the NHWC gradient there, and comes back: the same fp32 additions as accumulating in place. The
// transposes are kernels/layout's tiled 32 x 32 kernels, each a read and a write of its tensor
// (README.md, "NHWC", has their cost next to the convolutions').
#include <cstdint>

#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nhwc_internal.h"
#include "kernels/layout/layout.h"

namespace crema::kernels::cuda::nhwc_version {
namespace {

// Sub-buffers start at multiples of 4 floats, so that every piece stays 16-byte aligned (the NHWC
// kernels' 16-byte copies).
size_t aligned(int64_t floats) {
  return size_t((floats + 3) / 4 * 4);
}

struct Sizes {
  size_t x, w, y;  // N*H*W*C, K*R*S*Cg, N*P*Q*K, each rounded up to 4
  explicit Sizes(const Conv2dGeometry& g)
      : x(aligned(g.N * g.H * g.W * g.C)),
        w(aligned(g.K * g.R * g.S * (g.C / g.groups))),
        y(aligned(g.N * g.P() * g.Q() * g.K)) {}
};

void transpose(int64_t B, int64_t R, int64_t S, const float* from, float* to, gpu::Stream stream) {
  batched_transpose(B, R, S, from, to, TransposeVersion::best, stream);
}

}  // namespace

size_t forward_workspace(const Conv2dGeometry& g) {
  const Sizes s(g);
  return s.x + s.w + s.y + conv2d_forward_nhwc_workspace(g);
}

size_t backward_data_workspace(const Conv2dGeometry& g) {
  const Sizes s(g);
  return s.y + s.w + s.x + conv2d_backward_data_nhwc_workspace(g);
}

size_t backward_filter_workspace(const Conv2dGeometry& g) {
  const Sizes s(g);
  return s.x + s.y + s.w + conv2d_backward_filter_nhwc_workspace(g);
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             float* workspace, gpu::Stream stream, GemmMath math) {
  const Sizes s(g);
  const int64_t Cg = g.C / g.groups, PQ = g.P() * g.Q();
  float* x_nhwc = workspace;     // [N, H, W, C]
  float* w_krsc = x_nhwc + s.x;  // [K, R, S, Cg]
  float* y_nhwc = w_krsc + s.w;  // [N, P, Q, K]
  float* inner = y_nhwc + s.y;
  transpose(g.N, g.C, g.H * g.W, x, x_nhwc, stream);
  transpose(g.K, Cg, g.R * g.S, w, w_krsc, stream);
  conv2d_forward_nhwc(g, x_nhwc, w_krsc, bias, y_nhwc, inner, stream, math);
  transpose(g.N, PQ, g.K, y_nhwc, y, stream);
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream, GemmMath math) {
  const Sizes s(g);
  const int64_t Cg = g.C / g.groups, PQ = g.P() * g.Q();
  float* dy_nhwc = workspace;     // [N, P, Q, K]
  float* w_krsc = dy_nhwc + s.y;  // [K, R, S, Cg]
  float* dx_nhwc = w_krsc + s.w;  // [N, H, W, C]
  float* inner = dx_nhwc + s.x;
  transpose(g.N, g.K, PQ, dy, dy_nhwc, stream);
  transpose(g.K, Cg, g.R * g.S, w, w_krsc, stream);
  conv2d_backward_data_nhwc(g, dy_nhwc, w_krsc, dx_nhwc, inner, stream, math);
  transpose(g.N, g.H * g.W, g.C, dx_nhwc, dx, stream);
}

void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream, GemmMath math) {
  const Sizes s(g);
  const int64_t Cg = g.C / g.groups, PQ = g.P() * g.Q(), RS = g.R * g.S;
  float* x_nhwc = workspace;       // [N, H, W, C]
  float* dy_nhwc = x_nhwc + s.x;   // [N, P, Q, K]
  float* dw_krsc = dy_nhwc + s.y;  // [K, R, S, Cg]
  float* inner = dw_krsc + s.w;
  transpose(g.N, g.C, g.H * g.W, x, x_nhwc, stream);
  transpose(g.N, g.K, PQ, dy, dy_nhwc, stream);
  transpose(g.K, Cg, RS, dw, dw_krsc, stream);
  conv2d_backward_filter_nhwc(g, x_nhwc, dy_nhwc, dw_krsc, db, inner, stream, math);
  transpose(g.K, RS, Cg, dw_krsc, dw, stream);
}

}  // namespace crema::kernels::cuda::nhwc_version

// v9's record: every pass, every geometry, every math (FFMA, or mma.sync in tf32 and bf16).
namespace crema::kernels::records {

extern const ConvAlgorithm nhwc_implicit_gemm{
    "nhwc_implicit_gemm",
    9,
    DType::f32,
    Layout::nchw,
    supports_every_geometry,
    "any geometry",
    computes_in_every_math,
    [](ConvPass pass, const Conv2dGeometry& g, bool) -> size_t {
      switch (pass) {
        case ConvPass::forward:
          return cuda::nhwc_version::forward_workspace(g);
        case ConvPass::backward_data:
          return cuda::nhwc_version::backward_data_workspace(g);
        case ConvPass::backward_filter:
          break;
      }
      return cuda::nhwc_version::backward_filter_workspace(g);
    },
    cuda::nhwc_version::forward,
    cuda::nhwc_version::backward_data,
    cuda::nhwc_version::backward_filter};

}  // namespace crema::kernels::records
