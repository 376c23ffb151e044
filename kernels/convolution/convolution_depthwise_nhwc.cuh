// What the depthwise NHWC kernels share (convolution_depthwise_nhwc_cuda.cu: forward and
// backward data, v1; convolution_depthwise_nhwc_tile_cuda.cu: their v2; and
// convolution_depthwise_nhwc_filter_cuda.cu: the filter gradient): the element types, vector
// loads and stores of channels, the block's shape, the correlation's sizes, the taps in shared
// memory and the forward's epilogue.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/convolution/convolution_depthwise_nhwc.h"

namespace crema::kernels::cuda::depthwise_nhwc {

constexpr int kBlockThreads = 256;

// The element types: storage, channels in 16 bytes, widening to fp32 and rounding (to nearest
// even) back.
struct F32 {
  using T = float;
  static constexpr Element kElement = Element::f32;
  static constexpr int kVec = 4;
  static __device__ __forceinline__ float widen(T v) { return v; }
  static __device__ __forceinline__ T narrow(float v) { return v; }
};
struct Bf16 {
  using T = uint16_t;
  static constexpr Element kElement = Element::bf16;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float widen(T v) { return __uint_as_float(uint32_t(v) << 16); }
  static __device__ __forceinline__ T narrow(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
struct F16 {
  using T = uint16_t;
  static constexpr Element kElement = Element::f16;
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float widen(T v) { return __half2float(__ushort_as_half(v)); }
  static __device__ __forceinline__ T narrow(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

// V channels from p, widened: one element (V == 1) or one load of V elements (4, 8 or 16 bytes;
// p aligned to them). NC: through the read-only cache (tensors no thread of the kernel writes).
template <class E, int V, bool NC = true>
__device__ __forceinline__ void load_channels(const typename E::T* p, float (&v)[V]) {
  using T = typename E::T;
  if constexpr (V == 1) {
    v[0] = E::widen(NC ? __ldg(p) : *p);
  } else {
    constexpr int kBytes = V * int(sizeof(T)), kWords = kBytes / 4;
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "a vector is 4, 8 or 16 bytes");
    uint32_t words[kWords];
    if constexpr (kWords == 4) {
      const auto* q = reinterpret_cast<const uint4*>(p);
      const uint4 raw = NC ? __ldg(q) : *q;
      words[0] = raw.x, words[1] = raw.y, words[2] = raw.z, words[3] = raw.w;
    } else if constexpr (kWords == 2) {
      const auto* q = reinterpret_cast<const uint2*>(p);
      const uint2 raw = NC ? __ldg(q) : *q;
      words[0] = raw.x, words[1] = raw.y;
    } else {
      const auto* q = reinterpret_cast<const unsigned*>(p);
      words[0] = NC ? __ldg(q) : *q;
    }
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(T) == 4) {
        v[i] = __uint_as_float(words[i]);
      } else {
        v[2 * i] = E::widen(uint16_t(words[i] & 0xffffu));
        v[2 * i + 1] = E::widen(uint16_t(words[i] >> 16));
      }
    }
  }
}

// Rounds v to the type, stores it at p (one element or a vector of 4, 8 or 16 bytes, as
// load_channels reads) and leaves in v what was stored.
template <class E, int V>
__device__ __forceinline__ void store_channels(typename E::T* p, float (&v)[V]) {
  using T = typename E::T;
  if constexpr (V == 1) {
    const T t = E::narrow(v[0]);
    *p = t;
    v[0] = E::widen(t);
  } else {
    constexpr int kBytes = V * int(sizeof(T)), kWords = kBytes / 4;
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "a vector is 4, 8 or 16 bytes");
    uint32_t words[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(T) == 4) {
        words[i] = __float_as_uint(v[i]);
      } else {
        const uint16_t lo = E::narrow(v[2 * i]), hi = E::narrow(v[2 * i + 1]);
        words[i] = uint32_t(lo) | uint32_t(hi) << 16;
        v[2 * i] = E::widen(lo), v[2 * i + 1] = E::widen(hi);
      }
    }
    if constexpr (kWords == 4) {
      *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
    } else if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(p) = make_uint2(words[0], words[1]);
    } else {
      *reinterpret_cast<unsigned*>(p) = words[0];
    }
  }
}

// V floats of shared memory (16-byte aligned when V > 1).
template <int V>
__device__ __forceinline__ void read_shared(const float* p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = *p;
  } else {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      const float4 f = *reinterpret_cast<const float4*>(p + i);
      v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
    }
  }
}

// A block of kBlockThreads: tx threads across a slab of tx vectors of channels (the fastest
// index of the thread id) times ty across output positions. The slabs split the vectors evenly
// (144 bf16 channels = 18 vectors: 3 slabs of 6, not 8 + 8 + 2), at most max_tx a slab.
struct BlockShape {
  int tx, ty, slabs;
};
inline BlockShape block_shape(int vectors, int max_tx) {
  const int slabs = (vectors + max_tx - 1) / max_tx;
  const int tx = (vectors + slabs - 1) / slabs;
  return {tx, kBlockThreads / tx, (vectors + tx - 1) / tx};
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The correlation of a forward or backward-data pass (convolution_depthwise_nhwc_cuda.cu's top):
// in [N, H, W, Cin] -> out [N, P, Q, Cout].
struct Corr {
  int H, W, Cin;   // in [N, H, W, Cin]
  int P, Q, Cout;  // out [N, P, Q, Cout]
  int R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int taps_in, per_in;
  bool flip;
  int tx, ty;         // the block (BlockShape)
  int64_t rows;       // output rows: N * P
  int strips;         // strips a row: ceil(Q / QT) (cut)
  int64_t positions;  // strips of the whole output: rows * strips
};

// The correlation in [N, H, W, Cin] -> out [N, P, Q, Cout] through g's filter (its sizes,
// padding, strides and dilation), with taps_in, per_in and flip as its kernel reads them and
// block b; not yet cut into strips.
inline Corr make_corr(int H, int W, int Cin, int P, int Q, int Cout, const Conv2dGeometry& g,
                      int taps_in, int per_in, bool flip, const BlockShape& b) {
  Corr c{};
  c.H = H, c.W = W, c.Cin = Cin, c.P = P, c.Q = Q, c.Cout = Cout;
  c.R = int(g.R), c.S = int(g.S), c.pad_h = int(g.pad_h), c.pad_w = int(g.pad_w);
  c.stride_h = int(g.stride_h), c.stride_w = int(g.stride_w);
  c.dil_h = int(g.dilation_h), c.dil_w = int(g.dilation_w);
  c.taps_in = taps_in, c.per_in = per_in, c.flip = flip;
  c.tx = b.tx, c.ty = b.ty, c.rows = int64_t(g.N) * P;
  return c;
}

// ws[(m*RS + tap)*CH + j] = f[(o_first + j)*taps_in + m, tap] widened (tap rotated by 180 degrees
// when flipped), zero past the last channel.
template <class E>
__device__ void load_taps(const typename E::T* __restrict__ w, int o_first, int CH, int Cout,
                          int taps_in, int RS, bool flip, float* ws) {
  const int total = taps_in * RS * CH;
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const int j = i % CH, rest = i / CH, tap = rest % RS, m = rest / RS, o = o_first + j;
    ws[i] = o < Cout ? E::widen(w[(int64_t(o) * taps_in + m) * RS + (flip ? RS - 1 - tap : tap)])
                     : 0.0f;
  }
}

template <int V>
__device__ __forceinline__ void fma_channels(float (&acc)[V], const float (&a)[V],
                                             const float (&b)[V]) {
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = fmaf(a[e], b[e], acc[e]);
}

// The forward's epilogue on a strip of QT outputs (row p of image n, columns q0.., channels
// o0..o0+V-1): + bias, + residual, ReLU, one rounding at the store; the stored values added into
// sum and squares (the caller's running per-channel statistics).
template <class E, int V, int QT>
__device__ __forceinline__ void store_strip(const Corr& c, const float (&acc)[QT][V], int n, int p,
                                            int q0, int o0, typename E::T* out,
                                            const float* __restrict__ bias,
                                            const typename E::T* residual, bool relu,
                                            float (&sum)[V], float (&squares)[V]) {
  const int64_t first = ((int64_t(n) * c.P + p) * c.Q) * c.Cout + o0;
#pragma unroll
  for (int qi = 0; qi < QT; ++qi) {
    if (q0 + qi >= c.Q) break;
    const int64_t at = first + int64_t(q0 + qi) * c.Cout;
    float v[V];
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = acc[qi][e] + (bias != nullptr ? bias[o0 + e] : 0.0f);
    if (residual != nullptr) {
      float res[V];
      load_channels<E, V, false>(residual + at, res);  // may be out itself: not via nc
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] += res[e];
    }
    if (relu) {
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = fmaxf(v[e], 0.0f);
    }
    store_channels<E, V>(out + at, v);
#pragma unroll
    for (int e = 0; e < V; ++e) sum[e] += v[e], squares[e] = fmaf(v[e], v[e], squares[e]);
  }
}

// The block's statistics: thread (lane, row) holds its strips' sums of V channels; they are added
// per channel in row order (red: 2 * ty * CH floats of shared memory) and written as the block's
// row of the workspace, stats[blockIdx.x][2][Cout]. Every thread of the block calls it.
template <int V>
__device__ __forceinline__ void block_stats(const Corr& c, int lane, int row, int o_first,
                                            const float (&sum)[V], const float (&squares)[V],
                                            float* red, float* __restrict__ stats) {
  const int CH = c.tx * V;
#pragma unroll
  for (int e = 0; e < V; ++e) {
    red[row * CH + lane * V + e] = sum[e];
    red[(c.ty + row) * CH + lane * V + e] = squares[e];
  }
  __syncthreads();
  if (threadIdx.x >= CH || o_first + int(threadIdx.x) >= c.Cout) return;
  float a = 0.0f, b = 0.0f;
  for (int i = 0; i < c.ty; ++i)
    a += red[i * CH + threadIdx.x], b += red[(c.ty + i) * CH + threadIdx.x];
  float* block_row = stats + int64_t(blockIdx.x) * 2 * c.Cout + o_first + threadIdx.x;
  block_row[0] = a, block_row[c.Cout] = b;
}

// The halo tile (v2, or v3 when pipelined; convolution_depthwise_nhwc_tile_cuda.cu) on an uncut
// correlation whose block shape is for 16-byte vectors of V channels: whether it takes c, its
// grid's blocks across the output (the statistics' rows), and the launch (stats: nullptr, or the
// workspace of tile_blocks(c, V, pipelined) rows).
bool tile_fits(const Corr& c, int V);
int64_t tile_blocks(const Corr& c, int V, bool pipelined);
void correlate_tile(Element type, const Corr& c, const void* in, const void* w, void* out,
                    const TcEpilogue& ep, float* stats, bool pipelined, gpu::Stream stream,
                    const char* what);

// The filter gradient's bands (v4, convolution_depthwise_nhwc_filter_tile_cuda.cu), on the
// geometries the versions file's takes() gives it (16-byte aligned x and dy): the partial sums
// [slices][R*S][K] into `partial`; returns the slices (filter_bands_slices(g, type) of them).
int filter_bands_slices(const Conv2dGeometry& g, Element type);
int filter_bands(Element type, const Conv2dGeometry& g, const void* x, const void* dy,
                 float* partial, gpu::Stream stream);

}  // namespace crema::kernels::cuda::depthwise_nhwc
