// Convolution v4: depthwise geometries (C == groups > 1: one input channel per group, and
// M = K/groups filters per channel; output channel k reads input channel c = k / M).
//
// A depthwise convolution has no inner dimension worth a GEMM: each output is a dot product of
// R*S taps (9 for a 3x3 filter), and in v2's implicit GEMM each group is a 1-row slice of a
// 32-row tile (3% of the tile's FMAs do work) while v1 pays three launches per group. Here:
//
//   forward  one thread per output y[n,k,p,q] = bias[k] + sum_{r,s} w[k,0,r,s] * x[n,c,h,w]
//   data     one thread per input  dx[n,c,h,w] = sum over k of c's group and the taps (r, s)
//            whose output position (p, q) reads (h, w): p = (h + pad_h - r*dil_h) / stride_h
//            exact and inside P (q likewise) -- the gather form, no atomics
//   filter   dw[k,0,r,s] += sum_{n,p,q} dy[n,k,p,q] * x[n,c,h,w];  db[k] += sum_{n,p,q} dy[n,k,p,q]
//            block (k, taps t0 .. t0+15, split z): each thread walks positions j = (n, p, q) of
//            split z, t, t + 256, ..., keeping one sum per tap (the bias is a tap of ones), then
//            the block adds its 256 sums per tap in a fixed tree. With several splits (enough
//            blocks for the machine) each writes its sums to the workspace and a second kernel
//            adds them in split order.
//
// Every sum's order depends on the geometry only: deterministic.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/common/launch.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_implicit_gemm.cuh"

namespace crema::kernels::cuda::depthwise {
namespace {

using implicit_gemm::ConvParams;
using implicit_gemm::FastDivmod;

// by_M: divides by M = K/groups (output channel -> input channel).
__global__ void forward_kernel(ConvParams p, FastDivmod by_K, FastDivmod by_M,
                               const float* __restrict__ x, const float* __restrict__ w,
                               const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t total = int64_t(p.N) * p.K * p.PQ;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int nk, pq, n, k, out_p, out_q;
    p.by_PQ.divmod(int(i), nk, pq);
    by_K.divmod(nk, n, k);
    p.by_Q.divmod(pq, out_p, out_q);
    const float* image = x + (int64_t(n) * p.C + by_M.div(k)) * p.HW;  // x[n, c]
    const float* filter = w + k * p.RS;                                // w[k, 0]
    const int h0 = out_p * p.stride_h - p.pad_h, w0 = out_q * p.stride_w - p.pad_w;
    float acc = 0.0f;
    for (int r = 0; r < p.R; ++r) {
      const int h = h0 + r * p.dilation_h;
      if (unsigned(h) >= unsigned(p.H)) continue;
      for (int s = 0; s < p.S; ++s) {
        const int col = w0 + s * p.dilation_w;
        if (unsigned(col) < unsigned(p.W))
          acc = fmaf(filter[r * p.S + s], image[h * p.W + col], acc);
      }
    }
    y[i] = acc + (bias != nullptr ? bias[k] : 0.0f);
  }
}

// M = K/groups filters read channel c: k = c*M .. c*M + M-1. by_C divides by C.
__global__ void backward_data_kernel(ConvParams p, FastDivmod by_C, int M,
                                     const float* __restrict__ dy, const float* __restrict__ w,
                                     float* __restrict__ dx) {
  const int64_t total = int64_t(p.N) * p.C * p.HW;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int nc, hw, n, c, h, col;
    p.by_HW.divmod(int(i), nc, hw);
    by_C.divmod(nc, n, c);
    p.by_W.divmod(hw, h, col);
    float acc = 0.0f;
    for (int m = 0; m < M; ++m) {
      const int k = c * M + m;
      const float* grad = dy + (int64_t(n) * p.K + k) * p.PQ;  // dy[n, k]
      const float* filter = w + k * p.RS;                      // w[k, 0]
      for (int r = 0; r < p.R; ++r) {
        const int hp = h + p.pad_h - r * p.dilation_h;  // = out_p * stride_h when tap r reads h
        if (hp < 0) break;                              // and smaller still for larger r
        int out_p, rest_h;
        p.by_stride_h.divmod(hp, out_p, rest_h);
        if (rest_h != 0 || out_p >= p.P) continue;
        for (int s = 0; s < p.S; ++s) {
          const int wq = col + p.pad_w - s * p.dilation_w;
          if (wq < 0) break;
          int out_q, rest_w;
          p.by_stride_w.divmod(wq, out_q, rest_w);
          if (rest_w != 0 || out_q >= p.Q) continue;
          acc = fmaf(filter[r * p.S + s], grad[out_p * p.Q + out_q], acc);
        }
      }
    }
    dx[i] = acc;
  }
}

// Taps per filter-gradient block: one register sum each (a 3x3 filter and its bias fit one
// block).
constexpr int kTaps = 16;

// Block (k, y, z): taps y*kTaps .. of output channel k over positions [z*chunk, (z+1)*chunk) of
// N*P*Q. Taps are (r, s) = (t / S, t % S) for t < R*S, and t == R*S is the bias when `taps` is
// R*S + 1. With partial == null the block adds into dw and db itself; otherwise it writes
// partial[z][k][tap].
__global__ void __launch_bounds__(kThreads)
    backward_filter_kernel(ConvParams p, FastDivmod by_M, const float* __restrict__ x,
                           const float* __restrict__ dy, int taps, int chunk,
                           float* __restrict__ dw, float* __restrict__ db,
                           float* __restrict__ partial) {
  __shared__ float sums[kTaps][kThreads];
  const int k = blockIdx.x, tap0 = blockIdx.y * kTaps, split = blockIdx.z, t = threadIdx.x;
  const int NPQ = p.N * p.PQ;
  const int j_begin = split * chunk;
  const int j_end = chunk < NPQ - j_begin ? j_begin + chunk : NPQ;
  const int c = by_M.div(k);
  int tap_h[kTaps], tap_w[kTaps];  // the tap's offset in the receptive field
#pragma unroll
  for (int i = 0; i < kTaps; ++i) {
    int r = 0, s = 0;
    if (tap0 + i < p.RS) p.by_S.divmod(tap0 + i, r, s);
    tap_h[i] = r * p.dilation_h;
    tap_w[i] = s * p.dilation_w;
  }
  float acc[kTaps] = {};
  for (int j = j_begin + t; j < j_end; j += kThreads) {
    int n, pq, out_p, out_q;
    p.by_PQ.divmod(j, n, pq);
    p.by_Q.divmod(pq, out_p, out_q);
    const float d = dy[(int64_t(n) * p.K + k) * p.PQ + pq];
    const float* image = x + (int64_t(n) * p.C + c) * p.HW;  // x[n, c]
    const int h0 = out_p * p.stride_h - p.pad_h, w0 = out_q * p.stride_w - p.pad_w;
#pragma unroll
    for (int i = 0; i < kTaps; ++i) {
      const int tap = tap0 + i;
      if (tap < p.RS) {
        const int h = h0 + tap_h[i], col = w0 + tap_w[i];
        if (unsigned(h) < unsigned(p.H) && unsigned(col) < unsigned(p.W)) {
          acc[i] = fmaf(d, image[h * p.W + col], acc[i]);
        }
      } else if (tap < taps) {
        acc[i] += d;  // the bias tap
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kTaps; ++i) sums[i][t] = acc[i];
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
#pragma unroll
      for (int i = 0; i < kTaps; ++i) sums[i][t] += sums[i][t + stride];
    }
    __syncthreads();
  }
  const int tap = tap0 + t;
  if (t >= kTaps || tap >= taps) return;
  const float sum = sums[t][0];
  if (partial != nullptr) {
    partial[(int64_t(split) * p.K + k) * taps + tap] = sum;
  } else if (tap < p.RS) {
    dw[k * p.RS + tap] += sum;
  } else {
    db[k] += sum;
  }
}

// dw[k, tap] (or db[k] for the bias tap) += sum over splits z, in order, of partial[z][k][tap].
__global__ void reduce_splits_kernel(const float* __restrict__ partial, int splits, int K, int taps,
                                     int RS, float* __restrict__ dw, float* __restrict__ db) {
  const int outputs = K * taps;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < outputs; o += gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int z = 0; z < splits; ++z) sum += partial[int64_t(z) * outputs + o];
    const int k = o / taps, tap = o % taps;
    if (tap < RS) {
      dw[k * RS + tap] += sum;
    } else {
      db[k] += sum;
    }
  }
}

// How the filter gradient is cut: blocks of kTaps taps per output channel, and enough splits of
// N*P*Q for about two blocks per SM of an H100/H200 (132 SMs), each split at least
// kMinPositions long (8 positions per thread).
struct FilterPlan {
  int taps;    // R*S, + 1 with the bias gradient
  int splits;  // of N*P*Q
  int chunk;   // positions per split
};

FilterPlan filter_plan(const Conv2dGeometry& g, bool with_bias) {
  constexpr int64_t kTargetBlocks = 2 * 132, kMinPositions = 8 * kThreads;
  FilterPlan plan;
  plan.taps = int(g.R * g.S + (with_bias ? 1 : 0));
  const int64_t NPQ = g.N * g.P() * g.Q();
  const int64_t blocks = g.K * ((plan.taps + kTaps - 1) / kTaps);
  const int64_t wanted = (kTargetBlocks + blocks - 1) / blocks;
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, NPQ / kMinPositions));
  plan.chunk = int((NPQ + splits - 1) / splits);
  plan.splits = int((NPQ + plan.chunk - 1) / plan.chunk);
  return plan;
}

void check_grid(const Conv2dGeometry& g, int taps) {
  if (g.K > INT32_MAX || (taps + kTaps - 1) / kTaps > 65535) {
    throw Error("conv2d (depthwise) on CUDA: " + std::to_string(g.K) + " channels of a " +
                std::to_string(g.R) + "x" + std::to_string(g.S) + " filter are too many blocks");
  }
}

}  // namespace

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             gpu::Stream stream) {
  const ConvParams p = implicit_gemm::params_of(g);
  const int64_t total = g.N * g.K * p.PQ;
  forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(p, FastDivmod(p.K),
                                                             FastDivmod(p.K / p.C), x, w, bias, y);
  gpu::check_launch("conv2d_forward (depthwise)");
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   gpu::Stream stream) {
  const ConvParams p = implicit_gemm::params_of(g);
  const int64_t total = g.N * g.C * p.HW;
  backward_data_kernel<<<blocks_for(total), kThreads, 0, stream>>>(p, FastDivmod(p.C), p.K / p.C,
                                                                   dy, w, dx);
  gpu::check_launch("conv2d_backward_data (depthwise)");
}

size_t backward_filter_workspace(const Conv2dGeometry& g, bool with_bias) {
  const FilterPlan plan = filter_plan(g, with_bias);
  return plan.splits > 1 ? size_t(plan.splits) * size_t(g.K) * size_t(plan.taps) : 0;
}

void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
                     float* workspace, gpu::Stream stream) {
  const ConvParams p = implicit_gemm::params_of(g);
  const FilterPlan plan = filter_plan(g, db != nullptr);
  check_grid(g, plan.taps);
  float* partial = plan.splits > 1 ? workspace : nullptr;
  const dim3 grid(unsigned(g.K), unsigned((plan.taps + kTaps - 1) / kTaps), unsigned(plan.splits));
  backward_filter_kernel<<<grid, kThreads, 0, stream>>>(p, FastDivmod(p.K / p.C), x, dy, plan.taps,
                                                        plan.chunk, dw, db, partial);
  gpu::check_launch("conv2d_backward_filter (depthwise)");
  if (partial == nullptr) return;
  reduce_splits_kernel<<<blocks_for(g.K * plan.taps), kThreads, 0, stream>>>(
      partial, plan.splits, p.K, plan.taps, p.RS, dw, db);
  gpu::check_launch("conv2d_backward_filter (depthwise: sum of splits)");
}

}  // namespace crema::kernels::cuda::depthwise

// v4's record: depthwise geometries only, fp32 in every math (no tensor-core variant so far).
namespace crema::kernels::records {

extern const ConvAlgorithm depthwise_direct{
    "depthwise_direct",
    4,
    DType::f32,
    Layout::nchw,
    [](ConvPass, const Conv2dGeometry& g) { return g.depthwise(); },
    "one input channel per group (C == groups > 1)",
    computes_in_fp32_only,
    [](ConvPass pass, const Conv2dGeometry& g, bool with_bias) -> size_t {
      return pass == ConvPass::backward_filter
                 ? cuda::depthwise::backward_filter_workspace(g, with_bias)
                 : 0;
    },
    [](const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y, float*,
       gpu::Stream stream, cuda::GemmMath) { cuda::depthwise::forward(g, x, w, bias, y, stream); },
    [](const Conv2dGeometry& g, const float* dy, const float* w, float* dx, float*,
       gpu::Stream stream,
       cuda::GemmMath) { cuda::depthwise::backward_data(g, dy, w, dx, stream); },
    [](const Conv2dGeometry& g, const float* x, const float* dy, float* dw, float* db,
       float* workspace, gpu::Stream stream,
       cuda::GemmMath) { cuda::depthwise::backward_filter(g, x, dy, dw, db, workspace, stream); }};

}  // namespace crema::kernels::records
