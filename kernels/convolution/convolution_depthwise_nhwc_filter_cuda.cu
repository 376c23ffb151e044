// Depthwise NHWC convolution (convolution_depthwise_nhwc.h): the filter gradient, fp32,
//
//   dw[k, tap] += sum over (n, p, q) of dy[n,p,q,k] x[n, p*sh - ph + r*dh, q*sw - pw + s*dw, k/M]
//
// A block: a slab of output channels (tx threads of V channels: 16-byte vectors where M == 1, C
// is a multiple of them and x, dy are 16-byte aligned; one channel otherwise) x ty threads across
// one slice of the output positions, for a group of taps (blockIdx.z), each thread holding all
// its group's sums in registers. Two ways through the positions:
//   row walk   (vectors, S = 3, 5, 7, horizontal stride 1 or 2, no horizontal dilation) a thread
//              takes strips of kFilterQT outputs of a row, loads their dy once, and walks each
//              input row of its group of filter rows once across the strip ((kFilterQT-1)*sw + S
//              vectors), adding each vector times the strip's dy into the taps it meets; a group
//              is rows_a_group(S, V) filter rows (3x3: the whole filter; bf16 5x5 and 7x7: one
//              row);
//   tap loop   (any geometry) a thread takes single positions, reads dy once and x once a tap, for
//              groups of kTaps taps in (r, s) order.
// Thread (lane, row) takes items row, row + ty, ... of its slice: consecutive rows of a warp read
// neighbouring positions. The block then adds its rows' sums tap by tap in row order and writes
// them to partial[slice][tap][K] (workspace); a second kernel adds the slices in order onto dw.
// Every sum's order depends on the geometry only: deterministic, no atomics.
//
// The versions (convolution_depthwise_nhwc.h) are cuts of these two kernels: v1 the row walk with
// 16-byte vectors and rows_a_group(S, V) filter rows a group, slices for ~kTargetBlocks blocks;
// v2 the same cut into whole waves of kResident blocks; v3 the row walk with V narrowed to
// whole_filter_channels(S) (4- or 8-byte loads) and all S filter rows in one group, whole waves.
// v4 is convolution_depthwise_nhwc_filter_tile_cuda.cu (its partial sums end in sum_slices).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_implicit_gemm.cuh"

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

using implicit_gemm::FastDivmod;

// Taps a thread sums at once on the tap loop (registers: kTaps * V).
constexpr int kTaps = 9;
// The row walk: outputs a strip, and v1's filter rows a group (registers: rows * S * V sums, at
// most kWalkSums, and kFilterQT * V of dy).
constexpr int kFilterQT = 2;
__host__ __device__ constexpr int rows_a_group(int S, int V) {
  return kWalkSums / (S * V) < 1 ? 1 : kWalkSums / (S * V) > S ? S : kWalkSums / (S * V);
}
// v1: about four blocks a streaming multiprocessor on an H100 or H200 (132): slices enough for
// them, each at least kMinPerThread positions a thread. v2, v3: whole waves of kResident blocks
// (two blocks of 256 threads an SM at <= 128 registers: the walk's __launch_bounds__).
constexpr int64_t kTargetBlocks = 4 * 132, kMinPerThread = 16, kResident = 2 * 132;

struct FilterArgs {
  int H, W, C, P, Q, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, M;
  int tx, ty;
  int items, slice_length;     // positions (tap loop) or strips (row walk), and a slice's
  FastDivmod by_PQ, by_Q;      // the tap loop's position -> (n, p, q)
  FastDivmod by_strips, by_P;  // the row walk's strip -> (n, p, strip of the row)
};

// The block's sums of one tap: its ty rows' acc, added in row order, into partial[slice][tap].
template <int V>
__device__ __forceinline__ void block_sum(const FilterArgs& a, const float (&acc)[V], int tap,
                                          float* red, float* __restrict__ partial) {
  const int CH = a.tx * V, lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx;
#pragma unroll
  for (int e = 0; e < V; ++e) red[row * CH + lane * V + e] = acc[e];
  __syncthreads();
  const int k = blockIdx.y * CH + int(threadIdx.x);
  if (int(threadIdx.x) < CH && k < a.K) {
    float sum = 0.0f;
    for (int r = 0; r < a.ty; ++r) sum += red[r * CH + threadIdx.x];
    partial[(int64_t(blockIdx.x) * a.R * a.S + tap) * a.K + k] = sum;
  }
  __syncthreads();
}

// The tap loop (any geometry; see the top of this file).
template <class E, int V>
__global__ void __launch_bounds__(kBlockThreads)
    filter_kernel(FilterArgs a, const typename E::T* __restrict__ x,
                  const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  using T = typename E::T;
  extern __shared__ __align__(16) float red[];  // [ty][CH]
  const int CH = a.tx * V, RS = a.R * a.S, t0 = blockIdx.z * kTaps;
  const int lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx, k0 = blockIdx.y * CH + lane * V;
  const int begin = blockIdx.x * a.slice_length, end = min(a.items, begin + a.slice_length);
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
#pragma unroll
  for (int i = 0; i < kTaps; ++i) {
    if (t0 + i >= RS) break;  // the same for the whole block
    block_sum<V>(a, acc[i], t0 + i, red, partial);
  }
}

// The row walk (see the top of this file): S == KS, stride_w == ST, dil_w == 1, M == 1; RG filter
// rows a group. The body of filter_walk_kernel (v1, v2) and whole_filter_kernel (v3).
template <class E, int V, int KS, int ST, int RG>
__device__ __forceinline__ void filter_walk(const FilterArgs& a,
                                            const typename E::T* __restrict__ x,
                                            const typename E::T* __restrict__ dy,
                                            float* __restrict__ partial) {
  using T = typename E::T;
  constexpr int QT = kFilterQT;
  extern __shared__ __align__(16) float red[];  // [ty][CH]
  const int CH = a.tx * V, r0 = blockIdx.z * RG;
  const int lane = threadIdx.x % a.tx, row = threadIdx.x / a.tx, k0 = blockIdx.y * CH + lane * V;
  const int begin = blockIdx.x * a.slice_length, end = min(a.items, begin + a.slice_length);
  float acc[RG][KS][V] = {};
  if (k0 < a.K) {
    for (int j = begin + row; j < end; j += a.ty) {
      int np, strip, n, p;
      a.by_strips.divmod(j, np, strip);
      a.by_P.divmod(np, n, p);
      const int q0 = strip * QT;
      float d[QT][V];
#pragma unroll
      for (int qi = 0; qi < QT; ++qi) {
        if (q0 + qi < a.Q) {
          load_channels<E, V>(dy + ((int64_t(n) * a.P + p) * a.Q + q0 + qi) * a.K + k0, d[qi]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) d[qi][e] = 0.0f;  // past the row: adds nothing
        }
      }
      const T* image = x + int64_t(n) * a.H * a.W * a.C + k0;
      const int col0 = q0 * ST - a.pad_w;
#pragma unroll
      for (int rr = 0; rr < RG; ++rr) {
        const int h = p * a.stride_h - a.pad_h + (r0 + rr) * a.dil_h;
        if (r0 + rr >= a.R || unsigned(h) >= unsigned(a.H)) continue;
        const T* line = image + int64_t(h) * a.W * a.C;
#pragma unroll
        for (int i = 0; i < (QT - 1) * ST + KS; ++i) {
          const int col = col0 + i;
          if (unsigned(col) >= unsigned(a.W)) continue;
          float xv[V];
          load_channels<E, V>(line + int64_t(col) * a.C, xv);
#pragma unroll
          for (int qi = 0; qi < QT; ++qi) {
            const int s = i - qi * ST;
            if (s < 0 || s >= KS) continue;
#pragma unroll
            for (int e = 0; e < V; ++e) acc[rr][s][e] = fmaf(d[qi][e], xv[e], acc[rr][s][e]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < RG; ++rr) {
    if (r0 + rr >= a.R) break;  // the same for the whole block
#pragma unroll
    for (int s = 0; s < KS; ++s) block_sum<V>(a, acc[rr][s], (r0 + rr) * KS + s, red, partial);
  }
}

// v1 and v2 leave the registers to ptxas (75-124, two blocks an SM); v3's whole filter is held
// to 128 registers, two blocks an SM (kResident), at the price of a few spills.
template <class E, int V, int KS, int ST, int RG>
__global__ void __launch_bounds__(kBlockThreads)
    filter_walk_kernel(FilterArgs a, const typename E::T* __restrict__ x,
                       const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  filter_walk<E, V, KS, ST, RG>(a, x, dy, partial);
}
template <class E, int V, int KS, int ST, int RG>
__global__ void __launch_bounds__(kBlockThreads, 2)
    whole_filter_kernel(FilterArgs a, const typename E::T* __restrict__ x,
                        const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  filter_walk<E, V, KS, ST, RG>(a, x, dy, partial);
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

// dw += the slices' partial sums, in slice order.
void sum_slices(const Conv2dGeometry& g, int slices, const float* partial, float* dw,
                gpu::Stream stream) {
  const int64_t total = g.K * g.R * g.S;
  const unsigned blocks = unsigned(std::clamp<int64_t>((total + 255) / 256, 1, 65536));
  sum_slices_kernel<<<blocks, 256, 0, stream>>>(partial, slices, int(g.K), int(g.R * g.S), dw);
  gpu::check_launch("conv2d_backward_filter (depthwise, nhwc: slice sums)");
}

// Whether the filter gradient takes the row walk with V channels a thread.
bool filter_walks(const Conv2dGeometry& g, int V) {
  return V > 1 && g.dilation_w == 1 && (g.stride_w == 1 || g.stride_w == 2) &&
         (g.S == 3 || g.S == 5 || g.S == 7);
}

// How the filter gradient is cut for V channels a thread (`bytes` a vector) and `rows` filter
// rows a group on the row walk; whole_waves: v2's and v3's slices.
struct FilterPlan {
  BlockShape block;
  bool walk;         // the row walk, else the tap loop
  int strips;        // the row walk's strips a row
  int groups;        // of filter rows (row walk) or of kTaps taps (tap loop)
  int items;         // strips (row walk) or positions (tap loop) of the whole output
  int slices;        // of the items
  int slice_length;  // items a slice
};

// Slices for whole waves of kResident blocks: the fewest waves that are 90% full (at most
// `most` slices).
int64_t whole_wave_slices(int64_t per_slice, int64_t most) {
  for (int64_t waves = 1; waves <= 8; ++waves) {
    const int64_t slices = waves * kResident / per_slice;
    if (slices >= 1 && slices * per_slice * 10 >= waves * kResident * 9) {
      return std::min(slices, most);
    }
  }
  return std::min((kResident + per_slice - 1) / per_slice, most);
}

FilterPlan filter_plan(const Conv2dGeometry& g, int V, int bytes, int rows, bool whole_waves) {
  FilterPlan plan;
  // Vectors: a warp's lanes across at least 128 bytes of a pixel's channels where C allows.
  plan.block = block_shape(int(g.K) / V, V == 1 ? 32 : bytes >= 16 ? 8 : 16);
  plan.walk = filter_walks(g, V);
  plan.strips = int((g.Q() + kFilterQT - 1) / kFilterQT);
  const int64_t out_rows = g.N * g.P(),
                items = plan.walk ? out_rows * plan.strips : out_rows * g.Q();
  const int64_t per_item = plan.walk ? kFilterQT : 1;  // positions
  plan.groups = int(plan.walk ? (g.R + rows - 1) / rows : (g.R * g.S + kTaps - 1) / kTaps);
  plan.items = int(items);
  const int64_t per_slice = int64_t(plan.block.slabs) * plan.groups;
  const int64_t most =
      std::max<int64_t>(1, items * per_item / (int64_t(plan.block.ty) * kMinPerThread));
  const int64_t wanted =
      whole_waves ? whole_wave_slices(per_slice, most)
                  : std::clamp<int64_t>((kTargetBlocks + per_slice - 1) / per_slice, 1, most);
  plan.slice_length = int((items + wanted - 1) / wanted);
  plan.slices = int((items + plan.slice_length - 1) / plan.slice_length);
  return plan;
}

// The plan of a version for V channels a thread (v3: V is narrow_filter_channels').
FilterPlan version_plan(const Conv2dGeometry& g, int V, int element_bytes, Version version) {
  const int rows = version == Version::v3 ? int(g.S) : rows_a_group(int(g.S), V);
  return filter_plan(g, V, V * element_bytes, rows, version != Version::v1);
}

// Whether x and dy take vectors of V channels (V * element_bytes bytes): one filter a channel,
// whole vectors, both aligned to them.
bool filter_vectors(const Conv2dGeometry& g, int V, int element_bytes, const void* x,
                    const void* dy) {
  const uintptr_t bytes = uintptr_t(V) * uintptr_t(element_bytes);
  return g.K == g.C && g.C % V == 0 && reinterpret_cast<uintptr_t>(x) % bytes == 0 &&
         reinterpret_cast<uintptr_t>(dy) % bytes == 0;
}

const char* const kFilter = "conv2d_backward_filter (depthwise, nhwc)";

template <class Kernel, class T>
void launch_filter(Kernel kernel, const FilterPlan& plan, const FilterArgs& a, int V, const T* x,
                   const T* dy, float* partial, gpu::Stream stream) {
  const size_t smem = size_t(plan.block.tx) * V * plan.block.ty * sizeof(float);
  const dim3 grid(unsigned(plan.slices), unsigned(plan.block.slabs), unsigned(plan.groups));
  kernel<<<grid, unsigned(plan.block.tx * plan.block.ty), smem, stream>>>(a, x, dy, partial);
  gpu::check_launch(kFilter);
}

// The row walk of an S == KS filter with RG rows a group (kWhole: v3's kernel).
template <class E, int V, int KS, int RG, bool kWhole = false>
void launch_walk(const FilterPlan& plan, const FilterArgs& a, const typename E::T* x,
                 const typename E::T* dy, float* partial, gpu::Stream stream) {
  if constexpr (kWhole) {
    launch_filter(a.stride_w == 1 ? whole_filter_kernel<E, V, KS, 1, RG>
                                  : whole_filter_kernel<E, V, KS, 2, RG>,
                  plan, a, V, x, dy, partial, stream);
  } else {
    launch_filter(
        a.stride_w == 1 ? filter_walk_kernel<E, V, KS, 1, RG> : filter_walk_kernel<E, V, KS, 2, RG>,
        plan, a, V, x, dy, partial, stream);
  }
}

// The filter gradient with V channels a thread; whole: v3's whole filter a thread (the walk's
// geometries, V == whole_filter_channels(S, E::kVec)), else v1's row groups.
template <class E, int V, bool kWhole>
void filter_with(const Conv2dGeometry& g, const FilterPlan& plan, const void* x_, const void* dy_,
                 float* dw, float* partial, gpu::Stream stream) {
  using T = typename E::T;
  const auto *x = static_cast<const T*>(x_), *dy = static_cast<const T*>(dy_);
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
  a.tx = plan.block.tx, a.ty = plan.block.ty;
  a.items = plan.items, a.slice_length = plan.slice_length;
  a.by_PQ = FastDivmod(P * Q), a.by_Q = FastDivmod(Q);
  a.by_strips = FastDivmod(plan.strips), a.by_P = FastDivmod(P);
  if constexpr (kWhole) {
    // Only the widths v3 gives an S (whole_filter_channels) are compiled.
    constexpr int vec = E::kVec;
    if (g.S == 3 && V == whole_filter_channels(3, vec)) {
      if constexpr (V == whole_filter_channels(3, vec))
        launch_walk<E, V, 3, 3, true>(plan, a, x, dy, partial, stream);
    } else if (g.S == 5 && V == whole_filter_channels(5, vec)) {
      if constexpr (V == whole_filter_channels(5, vec))
        launch_walk<E, V, 5, 5, true>(plan, a, x, dy, partial, stream);
    } else if (g.S == 7 && V == whole_filter_channels(7, vec)) {
      if constexpr (V == whole_filter_channels(7, vec))
        launch_walk<E, V, 7, 7, true>(plan, a, x, dy, partial, stream);
    } else {
      throw Error(std::string(kFilter) + ": v3 has no " + std::to_string(V) +
                  "-channel kernel for S = " + std::to_string(g.S));
    }
  } else if (plan.walk) {  // V > 1 (filter_walks)
    if constexpr (V > 1) {
      switch (g.S) {
        case 3:
          launch_walk<E, V, 3, rows_a_group(3, V)>(plan, a, x, dy, partial, stream);
          break;
        case 5:
          launch_walk<E, V, 5, rows_a_group(5, V)>(plan, a, x, dy, partial, stream);
          break;
        default:
          launch_walk<E, V, 7, rows_a_group(7, V)>(plan, a, x, dy, partial, stream);
          break;
      }
    }
  } else {
    launch_filter(filter_kernel<E, V>, plan, a, V, x, dy, partial, stream);
  }
  sum_slices(g, plan.slices, partial, dw, stream);
}

template <class E>
void filter_typed(const Conv2dGeometry& g, const void* x, const void* dy, float* dw, float* partial,
                  gpu::Stream stream, Version version) {
  constexpr int kVec = E::kVec, kBytes = int(sizeof(typename E::T));
  version = runs(Pass::filter, g, E::kElement, version);
  if (version == Version::v4) {
    if (aligned16(x) && aligned16(dy)) {
      const int slices = filter_bands(E::kElement, g, x, dy, partial, stream);
      return sum_slices(g, slices, partial, dw, stream);
    }
    version = Version::v2;  // misaligned: v2's one channel a thread
  }
  if (version == Version::v3) {
    const int V = narrow_filter_channels(g, E::kElement);
    if (filter_vectors(g, V, kBytes, x, dy)) {
      const FilterPlan plan = version_plan(g, V, kBytes, Version::v3);
      switch (V) {
        case 2:
          return filter_with<E, 2, true>(g, plan, x, dy, dw, partial, stream);
        case 4:
          return filter_with<E, 4, true>(g, plan, x, dy, dw, partial, stream);
        default:
          break;  // not a width v3 takes (narrow_filter_channels gives 2 or 4 below 16 bytes)
      }
    }
    version = Version::v2;  // misaligned: v2's one channel a thread
  }
  if (filter_vectors(g, kVec, kBytes, x, dy)) {
    filter_with<E, kVec, false>(g, version_plan(g, kVec, kBytes, version), x, dy, dw, partial,
                                stream);
  } else {
    filter_with<E, 1, false>(g, version_plan(g, 1, kBytes, version), x, dy, dw, partial, stream);
  }
}

}  // namespace

size_t backward_filter_workspace(const Conv2dGeometry& g) {
  int slices = 1;
  for (Version version : {Version::v1, Version::v2, Version::v3}) {
    for (int V : {1, 2, 4, 8}) {
      if (V == 1 || (g.K == g.C && g.C % V == 0)) {
        slices = std::max(slices, version_plan(g, V, 2, version).slices);
        slices = std::max(slices, version_plan(g, V, 4, version).slices);
      }
    }
  }
  for (Element type : {Element::f32, Element::bf16}) {  // f16's cut is bf16's
    if (runs(Pass::filter, g, type, Version::v4) == Version::v4) {
      slices = std::max(slices, filter_bands_slices(g, type));
    }
  }
  return size_t(slices) * size_t(g.R * g.S) * size_t(g.K) * sizeof(float);
}

void backward_filter(const Conv2dGeometry& g, Element type, const void* x, const void* dy,
                     float* dw, void* workspace, gpu::Stream stream, Version version) {
  implicit_gemm::check_sizes(g);
  auto* partial = static_cast<float*>(workspace);
  switch (type) {
    case Element::f32:
      return filter_typed<F32>(g, x, dy, dw, partial, stream, version);
    case Element::bf16:
      return filter_typed<Bf16>(g, x, dy, dw, partial, stream, version);
    case Element::f16:
      return filter_typed<F16>(g, x, dy, dw, partial, stream, version);
  }
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
