// Convolution v7: direct, forward and backward data, for layers with few channels a group
// (a ResNet stem's 3 input channels, LeNet's 20), where a GEMM's tiles run mostly empty. Each
// thread sums its outputs straight from the definition, for PX pixels x CB output channels at once:
// a filter value serves PX pixels and an input value CB channels.
//
//   forward  y[n, k, p, q]  = bias[k] + sum over c, r, s of x[n, c, p*sh - ph + r*dh, ...] w[k, c,
//   r, s] data     dx[n, c, h, w] = sum over k, r, s with (h + ph - r*dh) / sh = p exact, in range,
//                             of dy[n, k, p, q] w[k, c, r, s]
//
// Backward data with stride: pixels h with the same (h + ph) mod sh have the same valid taps r,
// at the same offsets: p = i + (h0 + ph - r*dh) / sh for the i-th pixel h = h0 + i*sh of that
// class. So the data pass runs sh*sw classes (grid y), each a plain gather over its valid taps
// with every thread of a block on the same tap: uniform loops, no divisions in the inner loop,
// no atomics. The forward is the one-class case with source row p*sh + (r*dh - ph).
//
// The filter is first copied into the workspace as wt[group][in channel][r][s][out channel]
// (out channels padded to CB), so a thread reads its CB filter values as float4s, and all threads
// of a block read the same ones (one L1 broadcast).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/convolution/algorithm.h"
#include "kernels/convolution/convolution_cuda_internal.h"

namespace crema::kernels::cuda::direct {
namespace {

// Filters up to kMaxTaps taps a side, strides up to kMaxStride.
constexpr int kMaxTaps = 16, kMaxStride = 4;

constexpr int kThreads = 128, kPixels = 4;

// The taps of one row (or column) class: source index = i*step + offset[t] for tap t, and the
// class's outputs: output index = origin + i*out_step for i < extent.
struct Taps {
  int classes;  // sh for the data pass, 1 for forward
  int step, out_step;
  int count[kMaxStride], origin[kMaxStride], extent[kMaxStride];
  int tap[kMaxStride][kMaxTaps], offset[kMaxStride][kMaxTaps];
};

// One dimension of the geometry: input size `in` (H), output size `out` (P), filter size R.
Taps forward_taps(int R, int pad, int stride, int dilation, int out) {
  Taps t{};
  t.classes = 1, t.step = stride, t.out_step = 1;
  t.count[0] = R, t.origin[0] = 0, t.extent[0] = out;
  for (int r = 0; r < R; ++r) t.tap[0][r] = r, t.offset[0][r] = r * dilation - pad;
  return t;
}

Taps backward_data_taps(int R, int pad, int stride, int dilation, int in) {
  Taps t{};
  t.classes = stride, t.step = 1, t.out_step = stride;
  for (int a = 0; a < stride; ++a) {
    const int h0 = ((a - pad) % stride + stride) % stride;  // first pixel with (h + pad) % sh == a
    t.origin[a] = h0;
    t.extent[a] = h0 < in ? (in - h0 + stride - 1) / stride : 0;
    t.count[a] = 0;
    for (int r = 0; r < R; ++r) {
      const int numerator = h0 + pad - r * dilation;
      if (numerator % stride != 0) continue;
      t.tap[a][t.count[a]] = r;
      t.offset[a][t.count[a]++] = numerator / stride;
    }
  }
  return t;
}

struct Args {
  int in_c, in_h, in_w, in_cg;      // source (x or dy): channels of all groups, size, per group
  int out_c, out_h, out_w, out_cg;  // destination (y or dx)
  int out_blocks, wt_ld;            // CB-channel blocks per group; out_cg rounded up to CB
  int R, S;
  Taps rows, cols;
};

// wt[group][i][r][s][o] = w of (input channel i, output channel o) of the group, 0 for o past
// out_cg. Forward: w[g*Kg + o, i, r, s]; data: w[g*Kg + i, o, r, s].
__global__ void transpose_filter_kernel(const float* __restrict__ w, int groups, int in_cg,
                                        int out_cg, int RS, int wt_ld, bool data,
                                        float* __restrict__ wt) {
  const int64_t total = int64_t(groups) * in_cg * RS * wt_ld;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int o = int(e % wt_ld), rs = int(e / wt_ld % RS);
    const int64_t gi = e / wt_ld / RS;  // group * in_cg + i
    const int group = int(gi / in_cg), i = int(gi % in_cg);
    float v = 0.0f;
    if (o < out_cg) {
      v = data ? w[((int64_t(group) * in_cg + i) * out_cg + o) * RS + rs]
               : w[((int64_t(group) * out_cg + o) * in_cg + i) * RS + rs];
    }
    wt[e] = v;
  }
}

// Block (x, y, z): pixels [x*kThreads*kPixels, ...) of the class plane, image y / classes and
// class y % classes, group z / out_blocks and its channel block z % out_blocks. Thread t takes
// plane pixels base + t + u*kThreads.
template <int CB>
__global__ void __launch_bounds__(kThreads)
    direct_kernel(Args a, const float* __restrict__ in, const float* __restrict__ wt,
                  const float* __restrict__ bias, float* __restrict__ out) {
  const int classes = a.rows.classes * a.cols.classes;
  const int n = blockIdx.y / classes, cls = blockIdx.y % classes;
  const int cr = cls / a.cols.classes, cc = cls % a.cols.classes;
  const int group = blockIdx.z / a.out_blocks, o0 = blockIdx.z % a.out_blocks * CB;
  const int extent_h = a.rows.extent[cr], extent_w = a.cols.extent[cc];
  const int base = blockIdx.x * kThreads * kPixels + threadIdx.x;
  if (base >= extent_h * extent_w) return;
  int row[kPixels], col[kPixels];  // the pixel's first source row and column (tap offset 0)
  bool active[kPixels];
#pragma unroll
  for (int u = 0; u < kPixels; ++u) {
    const int e = base + u * kThreads;
    active[u] = e < extent_h * extent_w;
    row[u] = active[u] ? e / extent_w * a.rows.step : -(1 << 28);
    col[u] = active[u] ? e % extent_w * a.cols.step : 0;
  }
  float acc[CB][kPixels] = {};
  const float* image = in + (int64_t(n) * a.in_c + int64_t(group) * a.in_cg) * a.in_h * a.in_w;
  const float* filters = wt + int64_t(group) * a.in_cg * a.R * a.S * a.wt_ld + o0;
  for (int i = 0; i < a.in_cg; ++i) {
    const float* plane = image + int64_t(i) * a.in_h * a.in_w;
    const float* filter = filters + int64_t(i) * a.R * a.S * a.wt_ld;
    for (int tr = 0; tr < a.rows.count[cr]; ++tr) {
      const int r = a.rows.tap[cr][tr], dr = a.rows.offset[cr][tr];
      int line[kPixels];  // plane offset of the source row, or -1 outside
#pragma unroll
      for (int u = 0; u < kPixels; ++u) {
        const int h = row[u] + dr;
        line[u] = unsigned(h) < unsigned(a.in_h) ? h * a.in_w : -1;
      }
      for (int ts = 0; ts < a.cols.count[cc]; ++ts) {
        const int s = a.cols.tap[cc][ts], ds = a.cols.offset[cc][ts];
        float wv[CB];
        const float* f = filter + (r * a.S + s) * a.wt_ld;
#pragma unroll
        for (int o = 0; o < CB; o += 4) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(f + o));
          wv[o] = v.x, wv[o + 1] = v.y, wv[o + 2] = v.z, wv[o + 3] = v.w;
        }
#pragma unroll
        for (int u = 0; u < kPixels; ++u) {
          const int w = col[u] + ds;
          const float x =
              line[u] >= 0 && unsigned(w) < unsigned(a.in_w) ? plane[line[u] + w] : 0.0f;
#pragma unroll
          for (int o = 0; o < CB; ++o) acc[o][u] = fmaf(x, wv[o], acc[o][u]);
        }
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kPixels; ++u) {
    if (!active[u]) continue;
    const int e = base + u * kThreads;
    const int h = a.rows.origin[cr] + e / extent_w * a.rows.out_step;
    const int w = a.cols.origin[cc] + e % extent_w * a.cols.out_step;
#pragma unroll
    for (int o = 0; o < CB; ++o) {
      const int channel = o0 + o;
      if (channel >= a.out_cg) break;
      const int oc = group * a.out_cg + channel;
      out[((int64_t(n) * a.out_c + oc) * a.out_h + h) * a.out_w + w] =
          acc[o][u] + (bias != nullptr ? bias[oc] : 0.0f);
    }
  }
}

// CB = 4 for up to 4 output channels per group, else 8.
int channel_block(int out_cg) {
  return out_cg <= 4 ? 4 : 8;
}

Args make_args(const Conv2dGeometry& g, bool data) {
  Args a{};
  const int Cg = int(g.C / g.groups), Kg = int(g.K / g.groups);
  a.in_c = int(data ? g.K : g.C), a.in_h = int(data ? g.P() : g.H),
  a.in_w = int(data ? g.Q() : g.W);
  a.in_cg = data ? Kg : Cg;
  a.out_c = int(data ? g.C : g.K), a.out_h = int(data ? g.H : g.P()),
  a.out_w = int(data ? g.W : g.Q());
  a.out_cg = data ? Cg : Kg;
  const int cb = channel_block(a.out_cg);
  a.out_blocks = (a.out_cg + cb - 1) / cb, a.wt_ld = a.out_blocks * cb;
  a.R = int(g.R), a.S = int(g.S);
  if (data) {
    a.rows = backward_data_taps(a.R, int(g.pad_h), int(g.stride_h), int(g.dilation_h), int(g.H));
    a.cols = backward_data_taps(a.S, int(g.pad_w), int(g.stride_w), int(g.dilation_w), int(g.W));
  } else {
    a.rows = forward_taps(a.R, int(g.pad_h), int(g.stride_h), int(g.dilation_h), int(g.P()));
    a.cols = forward_taps(a.S, int(g.pad_w), int(g.stride_w), int(g.dilation_w), int(g.Q()));
  }
  return a;
}

void run(const Conv2dGeometry& g, bool data, const float* in, const float* w, const float* bias,
         float* out, float* workspace, gpu::Stream stream) {
  const Args a = make_args(g, data);
  const int RS = a.R * a.S;
  const int64_t wt_size = g.groups * a.in_cg * RS * a.wt_ld;
  transpose_filter_kernel<<<unsigned(std::clamp<int64_t>((wt_size + 255) / 256, 1, 65536)), 256, 0,
                            stream>>>(w, int(g.groups), a.in_cg, a.out_cg, RS, a.wt_ld, data,
                                      workspace);
  gpu::check_launch("conv2d (direct: filter layout)");
  int plane = 0;
  for (int cr = 0; cr < a.rows.classes; ++cr) {
    for (int cc = 0; cc < a.cols.classes; ++cc) {
      plane = std::max(plane, a.rows.extent[cr] * a.cols.extent[cc]);
    }
  }
  const int64_t grid_y = g.N * a.rows.classes * a.cols.classes, grid_z = g.groups * a.out_blocks;
  if (grid_y > 65535 || grid_z > 65535) {
    throw Error("conv2d on CUDA (direct): " + std::to_string(g.N) + " images or " +
                std::to_string(grid_z) + " channel blocks exceed the grid (65535)");
  }
  const dim3 grid(unsigned(std::max(1, (plane + kThreads * kPixels - 1) / (kThreads * kPixels))),
                  unsigned(grid_y), unsigned(grid_z));
  if (channel_block(a.out_cg) == 8) {
    direct_kernel<8><<<grid, kThreads, 0, stream>>>(a, in, workspace, bias, out);
  } else {
    direct_kernel<4><<<grid, kThreads, 0, stream>>>(a, in, workspace, bias, out);
  }
  gpu::check_launch(data ? "conv2d_backward_data (direct)" : "conv2d_forward (direct)");
}

size_t workspace(const Conv2dGeometry& g, bool data) {
  const Args a = make_args(g, data);
  return size_t(g.groups * a.in_cg * a.R * a.S * a.wt_ld);
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             float* workspace, gpu::Stream stream) {
  run(g, false, x, w, bias, y, workspace, stream);
}

void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                   float* workspace, gpu::Stream stream) {
  run(g, true, dy, w, nullptr, dx, workspace, stream);
}

bool supports(ConvPass, const Conv2dGeometry& g) {
  return g.R <= kMaxTaps && g.S <= kMaxTaps && g.stride_h <= kMaxStride && g.stride_w <= kMaxStride;
}

}  // namespace
}  // namespace crema::kernels::cuda::direct

// v7's record: forward and backward data as direct loops (fp32 in every math); the filter gradient
// is v2's (in the asked math). The heuristic's choice for grouped layers of few channels a group
// and some few-channel backward data passes (select.cpp).
namespace crema::kernels::records {

extern const ConvAlgorithm direct{
    "direct",
    7,
    DType::f32,
    Layout::nchw,
    cuda::direct::supports,
    "filters of at most 16x16 taps and strides of at most 4",
    [](ConvPass pass, cuda::GemmMath math) {
      return math == cuda::GemmMath::fp32 || pass == ConvPass::backward_filter;
    },
    [](ConvPass pass, const Conv2dGeometry& g, bool with_bias) -> size_t {
      if (pass == ConvPass::backward_filter) {
        return cuda::implicit_gemm::backward_filter_workspace(g, with_bias);
      }
      return cuda::direct::supports(pass, g)
                 ? cuda::direct::workspace(g, pass == ConvPass::backward_data)
                 : 0;
    },
    [](const Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
       float* workspace, gpu::Stream stream,
       cuda::GemmMath) { cuda::direct::forward(g, x, w, bias, y, workspace, stream); },
    [](const Conv2dGeometry& g, const float* dy, const float* w, float* dx, float* workspace,
       gpu::Stream stream,
       cuda::GemmMath) { cuda::direct::backward_data(g, dy, w, dx, workspace, stream); },
    cuda::implicit_gemm::backward_filter};

}  // namespace crema::kernels::records
