// LRN, CUDA versions. x is [N, C, H, W]; a plane is one (n, c), P = H*W values.
//
//   LrnVersion::direct   one thread per element sums its own window: n loads across channels
//       (P floats apart: neighbouring threads read neighbouring positions, coalesced), n^2
//       within a channel; neighbours' loads of the same values hit L1/L2. The backward divides
//       dy * y / scale again for every window it appears in.
//   LrnVersion::sliding  across channels, one thread per (n, position) walks c = 0 .. C-1 and
//       keeps the window sum running (add the value entering, subtract the one leaving, as
//       Caffe's GPU kernel): one load and one division per element, but C times fewer threads
//       and a dependent chain of C steps. Within a channel it runs `direct`.
// Window sums are added in a fixed order by one thread: the same bits on every run.
#include <cmath>

#include "kernels/common/launch.h"
#include "kernels/lrn/lrn.h"

namespace crema::kernels::cuda {
namespace {

constexpr int64_t kMaxBlocks = 8192;

// The window of element e, as the flat indices it covers; Index is unsigned (tensors up to 2^30
// elements: cheap division) or int64_t.
template <class Index>
struct Geometry {
  Index C, H, W, P;  // P = H * W
  int r;             // (local_size - 1) / 2
  bool across;

  // Calls f(j) for every in-bounds index j of e's window, in a fixed order.
  template <class F>
  __device__ void for_window(Index e, const F& f) const {
    const Index hw = e % P, nc = e / P;
    if (across) {
      const Index c = nc % C, first = nc - c;  // plane (n, 0)
      const Index lo = c >= Index(r) ? c - Index(r) : Index(0);
      const Index hi = c + Index(r) < C ? c + Index(r) : C - 1;
      for (Index cc = lo; cc <= hi; ++cc) f((first + cc) * P + hw);
      return;
    }
    const Index h = hw / W, w = hw % W, plane = nc * P;
    const Index h_lo = h >= Index(r) ? h - Index(r) : Index(0);
    const Index h_hi = h + Index(r) < H ? h + Index(r) : H - 1;
    const Index w_lo = w >= Index(r) ? w - Index(r) : Index(0);
    const Index w_hi = w + Index(r) < W ? w + Index(r) : W - 1;
    for (Index hh = h_lo; hh <= h_hi; ++hh) {
      for (Index ww = w_lo; ww <= w_hi; ++ww) f(plane + hh * W + ww);
    }
  }
};

// Coefficients: scale = k + alpha_n * sum x^2; dx = dy * scale^-beta - grad_coef * x * sum ratio.
struct Coefficients {
  float k, alpha_n, beta, grad_coef;
};

Coefficients coefficients(const LrnParams& p) {
  const float n = float(p.local_size);
  const float size = p.region == LrnRegion::across_channels ? n : n * n;
  return {p.k, p.alpha / size, p.beta, 2.0f * p.alpha * p.beta / size};
}

// --- direct: one thread per element ---

template <class Index>
__global__ void forward_direct(Index total, Geometry<Index> g, Coefficients k, const float* x,
                               float* __restrict__ y, float* __restrict__ scale) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    float sum = 0.0f;
    g.for_window(e, [&](Index j) { sum += x[j] * x[j]; });
    const float sc = k.k + k.alpha_n * sum;
    scale[e] = sc;
    y[e] = x[e] * powf(sc, -k.beta);
  }
}

template <class Index>
__global__ void backward_direct(Index total, Geometry<Index> g, Coefficients k, const float* x,
                                const float* y, const float* scale, const float* dy,
                                float* __restrict__ dx) {
  for (Index e = Index(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += Index(gridDim.x) * kThreads) {
    float sum = 0.0f;
    g.for_window(e, [&](Index j) { sum += dy[j] * y[j] / scale[j]; });
    dx[e] = dy[e] * powf(scale[e], -k.beta) - k.grad_coef * x[e] * sum;
  }
}

// --- sliding (across channels): one thread per (n, position), walking the channels ---

template <class Index>
__global__ void forward_sliding(Index positions, Geometry<Index> g, Coefficients k, const float* x,
                                float* __restrict__ y, float* __restrict__ scale) {
  for (Index t = Index(blockIdx.x) * kThreads + threadIdx.x; t < positions;
       t += Index(gridDim.x) * kThreads) {
    const Index n = t / g.P, hw = t % g.P;
    const float* xs = x + n * g.C * g.P + hw;  // channel c at xs[c * P]
    const Index base = n * g.C * g.P + hw;
    float sum = 0.0f;
    for (Index c = 0; c < Index(g.r) && c < g.C; ++c) sum += xs[c * g.P] * xs[c * g.P];
    for (Index c = 0; c < g.C; ++c) {
      const Index enter = c + Index(g.r);  // the window of c is [c - r, c + r]
      if (enter < g.C) sum += xs[enter * g.P] * xs[enter * g.P];
      const float sc = k.k + k.alpha_n * sum;
      scale[base + c * g.P] = sc;
      y[base + c * g.P] = xs[c * g.P] * powf(sc, -k.beta);
      if (c >= Index(g.r)) sum -= xs[(c - Index(g.r)) * g.P] * xs[(c - Index(g.r)) * g.P];
    }
  }
}

template <class Index>
__global__ void backward_sliding(Index positions, Geometry<Index> g, Coefficients k, const float* x,
                                 const float* y, const float* scale, const float* dy,
                                 float* __restrict__ dx) {
  for (Index t = Index(blockIdx.x) * kThreads + threadIdx.x; t < positions;
       t += Index(gridDim.x) * kThreads) {
    const Index n = t / g.P, hw = t % g.P;
    const Index base = n * g.C * g.P + hw;  // channel c at base + c * P
    auto ratio = [&](Index c) {
      const Index j = base + c * g.P;
      return dy[j] * y[j] / scale[j];
    };
    float sum = 0.0f;
    for (Index c = 0; c < Index(g.r) && c < g.C; ++c) sum += ratio(c);
    for (Index c = 0; c < g.C; ++c) {
      const Index enter = c + Index(g.r);
      if (enter < g.C) sum += ratio(enter);
      const Index j = base + c * g.P;
      dx[j] = dy[j] * powf(scale[j], -k.beta) - k.grad_coef * x[j] * sum;
      if (c >= Index(g.r)) sum -= ratio(c - Index(g.r));
    }
  }
}

template <class Index>
Geometry<Index> geometry(const LrnShape& s, const LrnParams& p) {
  return {Index(s.C),
          Index(s.H),
          Index(s.W),
          Index(s.H * s.W),
          int((p.local_size - 1) / 2),
          p.region == LrnRegion::across_channels};
}

bool use_sliding(const LrnParams& p, LrnVersion version) {
  return version == LrnVersion::sliding && p.region == LrnRegion::across_channels;
}

template <class Index>
void launch_forward(const LrnShape& s, const LrnParams& p, const float* x, float* y, float* scale,
                    LrnVersion version, gpu::Stream stream) {
  const Geometry<Index> g = geometry<Index>(s, p);
  const Coefficients k = coefficients(p);
  if (use_sliding(p, version)) {
    const Index positions = Index(s.N * s.H * s.W);
    forward_sliding<Index><<<blocks_for(positions, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        positions, g, k, x, y, scale);
  } else {
    const Index total = Index(s.N * s.C * s.H * s.W);
    forward_direct<Index><<<blocks_for(total, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        total, g, k, x, y, scale);
  }
  gpu::check_launch("lrn_forward");
}

template <class Index>
void launch_backward(const LrnShape& s, const LrnParams& p, const float* x, const float* y,
                     const float* scale, const float* dy, float* dx, LrnVersion version,
                     gpu::Stream stream) {
  const Geometry<Index> g = geometry<Index>(s, p);
  const Coefficients k = coefficients(p);
  if (use_sliding(p, version)) {
    const Index positions = Index(s.N * s.H * s.W);
    backward_sliding<Index><<<blocks_for(positions, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        positions, g, k, x, y, scale, dy, dx);
  } else {
    const Index total = Index(s.N * s.C * s.H * s.W);
    backward_direct<Index><<<blocks_for(total, kThreads, kMaxBlocks), kThreads, 0, stream>>>(
        total, g, k, x, y, scale, dy, dx);
  }
  gpu::check_launch("lrn_backward");
}

// Unsigned indices while the grid-stride loop cannot overflow them.
bool small(const LrnShape& s) {
  return s.N * s.C * s.H * s.W <= (int64_t(1) << 30);
}

}  // namespace

void lrn_forward(const LrnShape& s, const LrnParams& p, const float* x, float* y, float* scale,
                 LrnVersion version, gpu::Stream stream) {
  if (s.N * s.C * s.H * s.W == 0) return;
  if (small(s)) {
    launch_forward<unsigned>(s, p, x, y, scale, version, stream);
  } else {
    launch_forward<int64_t>(s, p, x, y, scale, version, stream);
  }
}

void lrn_backward(const LrnShape& s, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx, LrnVersion version,
                  gpu::Stream stream) {
  if (s.N * s.C * s.H * s.W == 0) return;
  if (small(s)) {
    launch_backward<unsigned>(s, p, x, y, scale, dy, dx, version, stream);
  } else {
    launch_backward<int64_t>(s, p, x, y, scale, dy, dx, version, stream);
  }
}

}  // namespace crema::kernels::cuda
