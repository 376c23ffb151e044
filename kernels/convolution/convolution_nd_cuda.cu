// N-d convolution on the GPU: vol2col + cuda::sgemm, the 2-D im2col_gemm record
// (im2col_gemm_cuda.cu) one axis up, on the padded 3-axis form. Images go in chunks of m, m as
// large as lets col [CTRS, m*O] and the GEMM's [Kg, m*O] fit kWorkspaceFloats (at least one
// image), with Cg = C/G, Kg = K/G, CTRS = Cg*T*R*S and O = out_volume. Per chunk and group:
//
//   forward   vol2col -> col;  out = w_g * col (sgemm);  y[n, k0 + k, :] = out[k, n*O ..] + bias
//   data      dyk[Kg, m*O] = dy's group channels (reorder);  dcol = w_g^T * dyk (sgemm);
//             dx = col2vol(dcol), a gather: one thread per input element sums, in a fixed tap
//             order, the dcol entries that read it, and writes (no atomics: deterministic)
//   filter    vol2col -> col;  dyk as above;  dw_g += dyk * col^T (sgemm, inner dim m*O)
//
// Grid-stride kernels, one thread per col entry (vol2col), per input element (col2vol) or per
// output (reorders). The products are where the time goes; kernels/convolution/README.md ("N-d")
// has the measurements.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_nd.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cuda {
namespace {

// A chunk's col and GEMM output together: 64 Mi floats (256 MiB).
constexpr int64_t kWorkspaceFloats = int64_t(64) << 20;

// The padded geometry as plain ints for the kernels (every extent of a tensor that fits a GPU
// fits an int; the flat indices are int64).
struct Vol {
  int in[3], out[3], kernel[3], pad[3], stride[3], dilation[3];
  int taps, O, V;  // T*R*S, out_volume, in_volume
};

Vol vol_of(const ConvNdGeometry& g) {
  Vol v{};
  for (int a = 0; a < 3; ++a) {
    v.in[a] = int(g.in[a]);
    v.out[a] = int(g.out(a));
    v.kernel[a] = int(g.kernel[a]);
    v.pad[a] = int(g.pad[a]);
    v.stride[a] = int(g.stride[a]);
    v.dilation[a] = int(g.dilation[a]);
  }
  v.taps = v.kernel[0] * v.kernel[1] * v.kernel[2];
  v.O = v.out[0] * v.out[1] * v.out[2];
  v.V = v.in[0] * v.in[1] * v.in[2];
  return v;
}

// col[(c*taps + tap), n*O + o] = im[n*im_stride + c*V + (d*H + i)*W + j] (0 outside), for
// `images` images of Cg channels.
__global__ void vol2col_kernel(Vol v, int Cg, int images, const float* __restrict__ im,
                               int64_t im_stride, float* __restrict__ col) {
  const int64_t cols = int64_t(images) * v.O, total = int64_t(Cg) * v.taps * cols;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = e / cols, column = e % cols;
    const int c = int(row / v.taps), tap = int(row % v.taps);
    const int n = int(column / v.O), o = int(column % v.O);
    const int t[3] = {tap / (v.kernel[1] * v.kernel[2]), tap / v.kernel[2] % v.kernel[1],
                      tap % v.kernel[2]};
    const int out[3] = {o / (v.out[1] * v.out[2]), o / v.out[2] % v.out[1], o % v.out[2]};
    int at[3];
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
      at[a] = out[a] * v.stride[a] - v.pad[a] + t[a] * v.dilation[a];
      inside = inside && at[a] >= 0 && at[a] < v.in[a];
    }
    col[e] = inside ? im[n * im_stride + int64_t(c) * v.V +
                         (int64_t(at[0]) * v.in[1] + at[1]) * v.in[2] + at[2]]
                    : 0.0f;
  }
}

// im[n*im_stride + c*V + (d, i, j)] = sum over the taps (t, r, s), in order, whose output
// position (o, p, q) reads (d, i, j) of col[c*taps + tap, n*O + (o, p, q)]: col2vol, written.
__global__ void col2vol_kernel(Vol v, int Cg, int images, const float* __restrict__ col,
                               float* __restrict__ im, int64_t im_stride) {
  const int64_t cols = int64_t(images) * v.O, total = int64_t(images) * Cg * v.V;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int n = int(e / (int64_t(Cg) * v.V)), c = int(e / v.V % Cg), x = int(e % v.V);
    const int at[3] = {x / (v.in[1] * v.in[2]), x / v.in[2] % v.in[1], x % v.in[2]};
    float sum = 0.0f;
    for (int tap = 0; tap < v.taps; ++tap) {
      const int t[3] = {tap / (v.kernel[1] * v.kernel[2]), tap / v.kernel[2] % v.kernel[1],
                        tap % v.kernel[2]};
      int o = 0;
      bool reads = true;
      for (int a = 0; a < 3; ++a) {
        const int offset = at[a] + v.pad[a] - t[a] * v.dilation[a];
        const int out = offset / v.stride[a];
        reads = reads && offset >= 0 && offset % v.stride[a] == 0 && out < v.out[a];
        o = o * v.out[a] + out;
      }
      if (reads) sum += col[(int64_t(c) * v.taps + tap) * cols + int64_t(n) * v.O + o];
    }
    im[n * im_stride + int64_t(c) * v.V + x] = sum;
  }
}

// dst[k, n*O + o] = src[n, k0 + k, o] for k < Kg: one group's channels of `images` images of an
// N K (out) tensor as the GEMM's [Kg, images*O] matrix.
__global__ void channels_to_rows(const float* __restrict__ src, int images, int K, int k0, int Kg,
                                 int O, float* __restrict__ dst) {
  const int64_t cols = int64_t(images) * O, total = Kg * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / cols, j = i % cols, n = j / O, o = j % O;
    dst[i] = src[(n * K + k0 + k) * O + o];
  }
}

// dst[n, k0 + k, o] = src[k, n*O + o] + bias[k0 + k] (no bias when null): the inverse.
__global__ void rows_to_channels(const float* __restrict__ src, const float* __restrict__ bias,
                                 int images, int K, int k0, int Kg, int O,
                                 float* __restrict__ dst) {
  const int64_t cols = int64_t(images) * O, total = Kg * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i / cols, j = i % cols, n = j / O, o = j % O;
    dst[(n * K + k0 + k) * O + o] = src[i] + (bias != nullptr ? bias[k0 + k] : 0.0f);
  }
}

// Sizes of one group's GEMMs and the chunk of images they take.
struct Plan {
  int64_t Cg, Kg, CTRS, O, V, chunk;
  explicit Plan(const ConvNdGeometry& g)
      : Cg(g.C / g.groups),
        Kg(g.K / g.groups),
        CTRS(Cg * g.kernel[0] * g.kernel[1] * g.kernel[2]),
        O(g.out(0) * g.out(1) * g.out(2)),
        V(g.in[0] * g.in[1] * g.in[2]),
        chunk(std::clamp<int64_t>(kWorkspaceFloats / ((CTRS + Kg) * O), 1, g.N)) {}
};

}  // namespace

size_t conv_nd_workspace(const ConvNdGeometry& nd) {
  const Plan s(nd.padded());
  return size_t((s.CTRS + s.Kg) * s.chunk * s.O);
}

void conv_nd_forward(const ConvNdGeometry& nd, const float* x, const float* w, const float* bias,
                     float* y, float* workspace, gpu::Stream stream) {
  const ConvNdGeometry g = nd.padded();
  const Plan s(g);
  const Vol v = vol_of(g);
  for (int64_t n0 = 0; n0 < g.N; n0 += s.chunk) {
    const int64_t m = std::min(s.chunk, g.N - n0), cols = m * s.O;
    float* col = workspace;                  // [CTRS, m*O]
    float* out = workspace + s.CTRS * cols;  // [Kg, m*O]
    for (int64_t group = 0; group < g.groups; ++group) {
      vol2col_kernel<<<blocks_for(s.CTRS * cols), kThreads, 0, stream>>>(
          v, int(s.Cg), int(m), x + (n0 * g.C + group * s.Cg) * s.V, g.C * s.V, col);
      gpu::check_launch("conv_nd_forward (vol2col)");
      sgemm(false, false, s.Kg, cols, s.CTRS, 1.0f, w + group * s.Kg * s.CTRS, s.CTRS, col, cols,
            0.0f, out, cols, stream);
      rows_to_channels<<<blocks_for(s.Kg * cols), kThreads, 0, stream>>>(
          out, bias, int(m), int(g.K), int(group * s.Kg), int(s.Kg), int(s.O), y + n0 * g.K * s.O);
      gpu::check_launch("conv_nd_forward (reorder)");
    }
  }
}

void conv_nd_backward_data(const ConvNdGeometry& nd, const float* dy, const float* w, float* dx,
                           float* workspace, gpu::Stream stream) {
  const ConvNdGeometry g = nd.padded();
  const Plan s(g);
  const Vol v = vol_of(g);
  for (int64_t n0 = 0; n0 < g.N; n0 += s.chunk) {
    const int64_t m = std::min(s.chunk, g.N - n0), cols = m * s.O;
    float* dyk = workspace;                 // [Kg, m*O]
    float* dcol = workspace + s.Kg * cols;  // [CTRS, m*O]
    for (int64_t group = 0; group < g.groups; ++group) {
      channels_to_rows<<<blocks_for(s.Kg * cols), kThreads, 0, stream>>>(
          dy + n0 * g.K * s.O, int(m), int(g.K), int(group * s.Kg), int(s.Kg), int(s.O), dyk);
      gpu::check_launch("conv_nd_backward_data (reorder)");
      sgemm(true, false, s.CTRS, cols, s.Kg, 1.0f, w + group * s.Kg * s.CTRS, s.CTRS, dyk, cols,
            0.0f, dcol, cols, stream);
      col2vol_kernel<<<blocks_for(m * s.Cg * s.V), kThreads, 0, stream>>>(
          v, int(s.Cg), int(m), dcol, dx + (n0 * g.C + group * s.Cg) * s.V, g.C * s.V);
      gpu::check_launch("conv_nd_backward_data (col2vol)");
    }
  }
}

void conv_nd_backward_filter(const ConvNdGeometry& nd, const float* x, const float* dy, float* dw,
                             float* workspace, gpu::Stream stream) {
  const ConvNdGeometry g = nd.padded();
  const Plan s(g);
  const Vol v = vol_of(g);
  for (int64_t n0 = 0; n0 < g.N; n0 += s.chunk) {
    const int64_t m = std::min(s.chunk, g.N - n0), cols = m * s.O;
    float* col = workspace;                  // [CTRS, m*O]
    float* dyk = workspace + s.CTRS * cols;  // [Kg, m*O]
    for (int64_t group = 0; group < g.groups; ++group) {
      vol2col_kernel<<<blocks_for(s.CTRS * cols), kThreads, 0, stream>>>(
          v, int(s.Cg), int(m), x + (n0 * g.C + group * s.Cg) * s.V, g.C * s.V, col);
      gpu::check_launch("conv_nd_backward_filter (vol2col)");
      channels_to_rows<<<blocks_for(s.Kg * cols), kThreads, 0, stream>>>(
          dy + n0 * g.K * s.O, int(m), int(g.K), int(group * s.Kg), int(s.Kg), int(s.O), dyk);
      gpu::check_launch("conv_nd_backward_filter (reorder)");
      sgemm(false, true, s.Kg, s.CTRS, cols, 1.0f, dyk, cols, col, cols, 1.0f,
            dw + group * s.Kg * s.CTRS, s.CTRS, stream);
    }
  }
}

}  // namespace crema::kernels::cuda
