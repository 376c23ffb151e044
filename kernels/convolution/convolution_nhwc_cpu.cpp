// 2-D convolution on NHWC tensors, CPU: transposes around the NCHW path (convolution_cpu.cpp).
//
// The CPU's fast path is im2col + GEMM, whose GEMMs pack their operands whatever the layout, so
// channels-last buys nothing here. An NHWC call transposes what it reads to NCHW (KCRS for the
// filter) in the workspace, runs that path and transposes what it writes back:
//
//   forward  x [N,HW,C] -> [N,C,HW], w [K,RS,Cg] -> [K,Cg,RS];  y_nchw = conv;  -> y [N,PQ,K]
//   data     dy [N,PQ,K] -> [N,K,PQ], w -> KCRS;  dx_nchw = conv^T dy;  -> dx [N,HW,C]
//   filter   x, dy -> NCHW;  dw [K,RS,Cg] -> [K,Cg,RS];  dw += ...;  -> dw (its old values kept)
//   bias     db[k] += sum over the N*P*Q rows of dy [NPQ, K] (elementwise's bias-row sum)
//
// The sums run in the NCHW path's order, so each pass gives the same bits as the NCHW call on
// the transposed tensors. The copies cost two or three transposes a pass (memory-bound, small
// next to the GEMMs).
#include "kernels/convolution/convolution.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/layout/layout.h"

namespace crema::kernels::cpu {
namespace {

// Floats of the transposed copies a pass keeps in the workspace (before the NCHW path's own).
struct Copies {
  size_t x, w, y;
  size_t total() const { return x + w + y; }
};
Copies copies(const Conv2dGeometry& g) {
  return {size_t(g.N * g.C * g.H * g.W), size_t(g.K * (g.C / g.groups) * g.R * g.S),
          size_t(g.N * g.K * g.P() * g.Q())};
}

}  // namespace

size_t conv2d_forward_nhwc_workspace(const Conv2dGeometry& g, int num_threads) {
  return copies(g).total() + conv2d_forward_workspace(g, num_threads);
}
size_t conv2d_backward_data_nhwc_workspace(const Conv2dGeometry& g, int num_threads) {
  return copies(g).total() + conv2d_backward_data_workspace(g, num_threads);
}
size_t conv2d_backward_filter_nhwc_workspace(const Conv2dGeometry& g, int num_threads) {
  return copies(g).total() + conv2d_backward_filter_workspace(g, num_threads);
}

void conv2d_forward_nhwc(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                         float* y, float* workspace, int num_threads) {
  const Copies c = copies(g);
  const int64_t HW = g.H * g.W, PQ = g.P() * g.Q(), RS = g.R * g.S, Cg = g.C / g.groups;
  float* x_nchw = workspace;
  float* w_kcrs = x_nchw + c.x;
  float* y_nchw = w_kcrs + c.w;
  batched_transpose(g.N, HW, g.C, x, x_nchw, num_threads);
  batched_transpose(g.K, RS, Cg, w, w_kcrs, num_threads);
  conv2d_forward(g, x_nchw, w_kcrs, bias, y_nchw, y_nchw + c.y, num_threads);
  batched_transpose(g.N, g.K, PQ, y_nchw, y, num_threads);
}

void conv2d_backward_data_nhwc(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                               float* workspace, int num_threads) {
  const Copies c = copies(g);
  const int64_t HW = g.H * g.W, PQ = g.P() * g.Q(), RS = g.R * g.S, Cg = g.C / g.groups;
  float* dx_nchw = workspace;
  float* w_kcrs = dx_nchw + c.x;
  float* dy_nchw = w_kcrs + c.w;
  batched_transpose(g.N, PQ, g.K, dy, dy_nchw, num_threads);
  batched_transpose(g.K, RS, Cg, w, w_kcrs, num_threads);
  conv2d_backward_data(g, dy_nchw, w_kcrs, dx_nchw, dy_nchw + c.y, num_threads);
  batched_transpose(g.N, g.C, HW, dx_nchw, dx, num_threads);
}

void conv2d_backward_filter_nhwc(const Conv2dGeometry& g, const float* x, const float* dy,
                                 float* dw, float* workspace, int num_threads) {
  const Copies c = copies(g);
  const int64_t HW = g.H * g.W, PQ = g.P() * g.Q(), RS = g.R * g.S, Cg = g.C / g.groups;
  float* x_nchw = workspace;
  float* dw_kcrs = x_nchw + c.x;
  float* dy_nchw = dw_kcrs + c.w;
  batched_transpose(g.N, HW, g.C, x, x_nchw, num_threads);
  batched_transpose(g.N, PQ, g.K, dy, dy_nchw, num_threads);
  batched_transpose(g.K, RS, Cg, dw, dw_kcrs, num_threads);
  conv2d_backward_filter(g, x_nchw, dy_nchw, dw_kcrs, dy_nchw + c.y, num_threads);
  batched_transpose(g.K, Cg, RS, dw_kcrs, dw, num_threads);
}

void conv2d_backward_bias_nhwc(const Conv2dGeometry& g, const float* dy, float* db,
                               int num_threads) {
  accumulate_bias_rows(g.N * g.P() * g.Q(), g.K, dy, db, num_threads);
}

}  // namespace crema::kernels::cpu
