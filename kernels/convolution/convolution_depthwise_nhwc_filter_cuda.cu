// Depthwise NHWC convolution (convolution_depthwise_nhwc.h): the filter gradient, fp32,
//
//   dw[k, tap] += sum over (n, p, q) of dy[n,p,q,k] x[n, p*sh - ph + r*dh, q*sw - pw + s*dw, k/M]
//
// A block: a slab of output channels (tx threads of V channels: 16-byte vectors where M == 1, C
// is a multiple of them and x, dy are 16-byte aligned; one channel otherwise) x ty threads across
// the positions of one slice of N*P*Q, for a group of kTaps taps (blockIdx.z; a 3x3 filter is one
// group, 5x5 three, 7x7 six). Thread (lane, row) walks positions row, row + ty, ... of its slice
// -- consecutive rows of a warp read neighbouring positions -- reading dy once and x once a tap,
// with all its taps' sums in registers. The block then adds its rows' sums tap by tap in row order
// and writes them to partial[slice][tap][K] (workspace); a second kernel adds the slices in order
// onto dw. Every sum's order depends on the geometry only: deterministic, no atomics.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_implicit_gemm.cuh"

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

using implicit_gemm::FastDivmod;

// Taps a thread sums at once (registers: kTaps * V).
constexpr int kTaps = 9;
// About four blocks a streaming multiprocessor on an H100 or H200 (132): slices enough for them,
// each at least kMinPerThread positions a thread.
constexpr int64_t kTargetBlocks = 4 * 132, kMinPerThread = 16;

struct FilterArgs {
  int H, W, C, P, Q, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, M;
  int tx, ty, slice_length, npq;
  FastDivmod by_PQ, by_Q;
};

template <class E, int V>
__global__ void __launch_bounds__(kBlockThreads)
    filter_kernel(FilterArgs a, const typename E::T* __restrict__ x,
                  const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  using T = typename E::T;
  extern __shared__ __align__(16) float red[];  // [ty][CH]
  const int CH = a.tx * V, RS = a.R * a.S, k_first = blockIdx.y * CH, t0 = blockIdx.z * kTaps;
  const int lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx, k0 = k_first + lane * V;
  const int begin = blockIdx.x * a.slice_length, end = min(a.npq, begin + a.slice_length);
  int tap_h[kTaps], tap_w[kTaps];  // the taps' offsets in the receptive field
#pragma unroll
  for (int i = 0; i < kTaps; ++i) {
    const int t = min(t0 + i, RS - 1);
    tap_h[i] = t / a.S * a.dil_h, tap_w[i] = t % a.S * a.dil_w;
  }
  float acc[kTaps][V] = {};
  if (k0 < a.K) {
    const int cin = k0 / a.M;  // V > 1: k0 itself
    for (int j = begin + row; j < end; j += a.ty) {
      int n, pq, p, q;
      a.by_PQ.divmod(j, n, pq);
      a.by_Q.divmod(pq, p, q);
      float d[V];
      load_channels<E, V>(dy + int64_t(j) * a.K + k0, d);
      const T* image = x + int64_t(n) * a.H * a.W * a.C + cin;
      const int h0 = p * a.stride_h - a.pad_h, w0 = q * a.stride_w - a.pad_w;
#pragma unroll
      for (int i = 0; i < kTaps; ++i) {
        const int h = h0 + tap_h[i], col = w0 + tap_w[i];
        if (t0 + i >= RS || unsigned(h) >= unsigned(a.H) || unsigned(col) >= unsigned(a.W)) {
          continue;
        }
        float xv[V];
        load_channels<E, V>(image + (int64_t(h) * a.W + col) * a.C, xv);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[i][e] = fmaf(d[e], xv[e], acc[i][e]);
      }
    }
  }
  // The block's sums, tap by tap: each channel's ty rows added in row order.
#pragma unroll
  for (int i = 0; i < kTaps; ++i) {
    if (t0 + i >= RS) break;  // the same for the whole block
#pragma unroll
    for (int e = 0; e < V; ++e) red[row * CH + lane * V + e] = acc[i][e];
    __syncthreads();
    const int k = k_first + int(threadIdx.x);
    if (int(threadIdx.x) < CH && k < a.K) {
      float sum = 0.0f;
      for (int r = 0; r < a.ty; ++r) sum += red[r * CH + threadIdx.x];
      partial[(int64_t(blockIdx.x) * RS + t0 + i) * a.K + k] = sum;
    }
    __syncthreads();
  }
}

// dw[k, tap] += sum over slices, in order, of partial[slice][tap][k].
__global__ void sum_slices_kernel(const float* __restrict__ partial, int slices, int K, int RS,
                                  float* __restrict__ dw) {
  const int64_t total = int64_t(K) * RS;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = i % K, tap = i / K;
    float sum = 0.0f;
    for (int s = 0; s < slices; ++s) sum += partial[s * total + i];
    dw[k * RS + tap] += sum;
  }
}

// How the filter gradient is cut for V channels a thread.
struct FilterPlan {
  BlockShape block;
  int groups;        // of kTaps taps
  int slices;        // of N*P*Q
  int slice_length;  // positions a slice
};

FilterPlan filter_plan(const Conv2dGeometry& g, int V) {
  FilterPlan plan;
  plan.block = block_shape(int(g.K) / V, V > 1 ? 8 : 32);
  plan.groups = int((g.R * g.S + kTaps - 1) / kTaps);
  const int64_t npq = g.N * g.P() * g.Q();
  const int64_t per_slice = int64_t(plan.block.slabs) * plan.groups;
  const int64_t most = std::max<int64_t>(1, npq / (int64_t(plan.block.ty) * kMinPerThread));
  const int64_t wanted = std::clamp<int64_t>((kTargetBlocks + per_slice - 1) / per_slice, 1, most);
  plan.slice_length = int((npq + wanted - 1) / wanted);
  plan.slices = int((npq + plan.slice_length - 1) / plan.slice_length);
  return plan;
}

bool filter_vectors(const Conv2dGeometry& g, int vec, const void* x, const void* dy) {
  return g.K == g.C && g.C % vec == 0 && aligned16(x) && aligned16(dy);
}

const char* const kFilter = "conv2d_backward_filter (depthwise, nhwc)";

template <class E, int V>
void filter_with(const Conv2dGeometry& g, const void* x, const void* dy, float* dw, float* partial,
                 gpu::Stream stream) {
  using T = typename E::T;
  const FilterPlan plan = filter_plan(g, V);
  if (plan.block.slabs > 65535 || plan.groups > 65535) {
    throw Error(std::string(kFilter) + ": " + std::to_string(g.K) + " channels of a " +
                std::to_string(g.R) + "x" + std::to_string(g.S) + " filter are too many blocks");
  }
  const int P = int(g.P()), Q = int(g.Q());
  FilterArgs a;
  a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.P = P, a.Q = Q, a.K = int(g.K);
  a.R = int(g.R), a.S = int(g.S), a.pad_h = int(g.pad_h), a.pad_w = int(g.pad_w);
  a.stride_h = int(g.stride_h), a.stride_w = int(g.stride_w);
  a.dil_h = int(g.dilation_h), a.dil_w = int(g.dilation_w), a.M = int(g.K / g.C);
  a.tx = plan.block.tx, a.ty = plan.block.ty, a.slice_length = plan.slice_length;
  a.npq = int(g.N) * P * Q, a.by_PQ = FastDivmod(P * Q), a.by_Q = FastDivmod(Q);
  const size_t smem = size_t(plan.block.tx) * V * plan.block.ty * sizeof(float);
  const dim3 grid(unsigned(plan.slices), unsigned(plan.block.slabs), unsigned(plan.groups));
  filter_kernel<E, V><<<grid, unsigned(plan.block.tx * plan.block.ty), smem, stream>>>(
      a, static_cast<const T*>(x), static_cast<const T*>(dy), partial);
  gpu::check_launch(kFilter);
  const int64_t total = g.K * g.R * g.S;
  const unsigned blocks = unsigned(std::clamp<int64_t>((total + 255) / 256, 1, 65536));
  sum_slices_kernel<<<blocks, 256, 0, stream>>>(partial, plan.slices, int(g.K), int(g.R * g.S), dw);
  gpu::check_launch("conv2d_backward_filter (depthwise, nhwc: slice sums)");
}

template <class E>
void filter_typed(const Conv2dGeometry& g, const void* x, const void* dy, float* dw, float* partial,
                  gpu::Stream stream) {
  if (filter_vectors(g, E::kVec, x, dy)) {
    filter_with<E, E::kVec>(g, x, dy, dw, partial, stream);
  } else {
    filter_with<E, 1>(g, x, dy, dw, partial, stream);
  }
}

}  // namespace

size_t backward_filter_workspace(const Conv2dGeometry& g) {
  int slices = filter_plan(g, 1).slices;
  for (int vec : {4, 8}) {
    if (g.K == g.C && g.C % vec == 0) slices = std::max(slices, filter_plan(g, vec).slices);
  }
  return size_t(slices) * size_t(g.R * g.S) * size_t(g.K) * sizeof(float);
}

void backward_filter(const Conv2dGeometry& g, Element type, const void* x, const void* dy,
                     float* dw, void* workspace, gpu::Stream stream) {
  implicit_gemm::check_sizes(g);
  auto* partial = static_cast<float*>(workspace);
  switch (type) {
    case Element::f32:
      return filter_typed<F32>(g, x, dy, dw, partial, stream);
    case Element::bf16:
      return filter_typed<Bf16>(g, x, dy, dw, partial, stream);
    case Element::f16:
      return filter_typed<F16>(g, x, dy, dw, partial, stream);
  }
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
