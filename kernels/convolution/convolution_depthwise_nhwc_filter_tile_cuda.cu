// Depthwise NHWC convolution, the filter gradient's v4: bands in shared memory
// (convolution_depthwise_nhwc.h lists the versions; v1-v3 are
// convolution_depthwise_nhwc_filter_cuda.cu).
//
//   dw[k, r, s] += sum over (n, p, q) of dy[n,p,q,k] x[n, p*st - ph + r, q*st - pw + s, k]
//
// Why: v1-v3 give each thread all the taps it sums and walk x through L1/L2 per strip, so x is
// re-read R * (S + 1) / 2 times (and R times more in v1's row groups). Here a block owns a slab of
// CH channels (two 16-byte chunks of a pixel, or one) and a slice of bands, a band being TP output
// rows of one image. For each band it copies, with cp.async, the band's dy [TP][Q][CH] and the
// x rows the band reads [(TP-1)*st + R][(Q-1)*st + S][CH] (the padding zero-filled) into shared
// memory: DRAM and L2 see x and dy about once (x's R-1 halo rows once more a band). Then each
// thread (lane, filter row r, group g) sums the S taps (r, 0..S-1) of V channels over one output
// row of the band and a run of its columns, keeping the last S x vectors of its input row in a
// register ring (each x vector read once from shared memory per thread, S*V FMAs per dy vector):
// registers S*V sums + S*V ring + V of dy, with V = 4 for a 16-bit 7x7 (8 elsewhere in 16 bits,
// 4 in fp32). The groups g = (row of the band, run of columns) are added in order at the end, the
// slices by sum_slices_kernel: fixed order, no atomics.
//
// Takes: one filter a channel, S = 3, 5, 7 and R <= 7, strides (1, 1) or (2, 2), no dilation, C a
// multiple of 16 bytes, x and dy 16-byte aligned (the versions file's takes()).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_implicit_gemm.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

using implicit_gemm::FastDivmod;

// Shared memory a band takes at most (four blocks an SM), and blocks to aim for (many short
// slices: the last wave's tail stays small).
constexpr size_t kBandBytes = 48 * 1024;
constexpr int64_t kBandBlocks = 8 * 132;

struct BandArgs {
  int H, W, C, P, Q, R, S, pad_h, pad_w, st;
  int chunks;      // 16-byte chunks of a pixel in the slab: CH = chunks * (16 / element bytes)
  int tx, groups;  // lanes of V channels; thread groups (lane, r) x groups <= 256
  int tp, runs;    // output rows a band; runs of columns a row (groups = tp * runs)
  int run_length;  // columns a run
  int ih, iw;      // x rows and columns a band reads
  int pitch;       // pixels a row of the band's x in shared memory: iw, padded (bank conflicts)
  int items, slice_length;  // bands of the whole output (N * bands an image), a slice's
  FastDivmod by_bands;      // item -> (n, band)
};

// Channels a thread: 4 for a 16-bit 7x7 (registers), else 16 bytes.
constexpr int band_channels(int S, int vec) {
  return vec == 8 && S == 7 ? 4 : vec;
}

template <class E, int V, int KS, int ST>
__global__ void __launch_bounds__(kBlockThreads)
    band_kernel(BandArgs a, const typename E::T* __restrict__ x,
                const typename E::T* __restrict__ dy, float* __restrict__ partial) {
  using T = typename E::T;
  constexpr int kChunk = 16 / int(sizeof(T));  // elements a 16-byte chunk
  extern __shared__ __align__(16) float smem[];
  const int CH = a.chunks * kChunk, c_first = blockIdx.y * CH;
  T* x_band = reinterpret_cast<T*>(smem);     // [ih][pitch][CH], columns iw.. unused
  T* dy_band = x_band + a.ih * a.pitch * CH;  // [tp][Q][CH]
  const int lane = threadIdx.x % a.tx, r = threadIdx.x / a.tx % a.R;
  const int g = threadIdx.x / (a.tx * a.R), pl = g % a.tp, run = g / a.tp;
  const bool active = g < a.groups && run < a.runs;
  const int q_begin = run * a.run_length, q_end = min(a.Q, q_begin + a.run_length);
  float acc[KS][V] = {};
  const int begin = blockIdx.x * a.slice_length, end = min(a.items, begin + a.slice_length);
  for (int item = begin; item < end; ++item) {
    int n, band;
    a.by_bands.divmod(item, n, band);
    const int p_first = band * a.tp;
    __syncthreads();  // the previous band's reads are done
    const T* x_image = x + int64_t(n) * a.H * a.W * a.C + c_first;
    const int x_copies = a.ih * a.iw * a.chunks;
    const int h_first = p_first * a.st - a.pad_h;
    for (int i = threadIdx.x; i < x_copies; i += blockDim.x) {
      const int chunk = i % a.chunks, pixel = i / a.chunks;
      const int row = pixel / a.iw, column = pixel % a.iw;
      const int h = h_first + row, col = column - a.pad_w;
      const bool inside = unsigned(h) < unsigned(a.H) && unsigned(col) < unsigned(a.W);
      const T* src = inside ? x_image + (int64_t(h) * a.W + col) * a.C + chunk * kChunk : x;
      T* dst = x_band + (row * a.pitch + column) * CH + chunk * kChunk;
      detail::cp_async<16>(dst, src, inside ? 16 : 0);
    }
    const T* dy_rows = dy + (int64_t(n) * a.P + p_first) * a.Q * a.C + c_first;
    const int dy_copies = a.tp * a.Q * a.chunks;
    for (int i = threadIdx.x; i < dy_copies; i += blockDim.x) {
      const int chunk = i % a.chunks, pixel = i / a.chunks;
      const bool inside = p_first + pixel / a.Q < a.P;
      const T* src = inside ? dy_rows + int64_t(pixel) * a.C + chunk * kChunk : dy;
      detail::cp_async<16>(dy_band + pixel * CH + chunk * kChunk, src, inside ? 16 : 0);
    }
    detail::cp_async_commit();
    detail::cp_async_wait<0>();
    __syncthreads();
    if (!active || p_first + pl >= a.P) continue;
    // Input row pl*st + r of the band; tile column c holds x column c - pad_w. The ring holds
    // column q_begin*st + c at ring[c % KS]; q0 - q_begin is a multiple of KS, so every ring index
    // below is a constant.
    const T* line = x_band + (pl * ST + r) * a.pitch * CH + lane * V;
    const T* grad = dy_band + pl * a.Q * CH + lane * V;
    float ring[KS][V];
#pragma unroll
    for (int c = 0; c < KS - ST; ++c) {
      load_channels<E, V, false>(line + (q_begin * ST + c) * CH, ring[c % KS]);
    }
    for (int q0 = q_begin; q0 < q_end; q0 += KS) {
#pragma unroll
      for (int u = 0; u < KS; ++u) {
        const int q = q0 + u;
        if (q >= q_end) break;
#pragma unroll
        for (int i = 0; i < ST; ++i) {  // the columns q*st + KS - ST + i enter the ring
          const int c = u * ST + KS - ST + i;
          load_channels<E, V, false>(line + (q * ST + KS - ST + i) * CH, ring[c % KS]);
        }
        float d[V];
        load_channels<E, V, false>(grad + q * CH, d);
#pragma unroll
        for (int s = 0; s < KS; ++s) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            acc[s][e] = fmaf(d[e], ring[(u * ST + s) % KS][e], acc[s][e]);
          }
        }
      }
    }
  }
  // The groups' sums, added in group order: red[g][r][s][CH] over the bands' memory.
  __syncthreads();
  float* red = smem;
  if (active) {
#pragma unroll
    for (int s = 0; s < KS; ++s) {
#pragma unroll
      for (int e = 0; e < V; ++e) red[((g * a.R + r) * KS + s) * CH + lane * V + e] = acc[s][e];
    }
  }
  __syncthreads();
  const int taps = a.R * KS;
  for (int i = threadIdx.x; i < taps * CH; i += blockDim.x) {
    float sum = 0.0f;
    for (int j = 0; j < a.groups; ++j) sum += red[j * taps * CH + i];
    const int tap = i / CH, k = c_first + i % CH;
    partial[(int64_t(blockIdx.x) * taps + tap) * a.C + k] = sum;
  }
}

// The cut of g into slabs, bands, groups and slices (V channels a thread, `bytes` an element).
BandArgs band_args(const Conv2dGeometry& g, int V, int bytes) {
  BandArgs a{};
  a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.P = int(g.P()), a.Q = int(g.Q());
  a.R = int(g.R), a.S = int(g.S), a.pad_h = int(g.pad_h), a.pad_w = int(g.pad_w);
  a.st = int(g.stride_w);
  const int chunks = int(g.C) * bytes / 16;
  a.chunks = chunks % 2 == 0 ? 2 : 1;
  const int CH = a.chunks * 16 / bytes;
  a.tx = CH / V;
  a.groups = kBlockThreads / (a.tx * a.R);
  a.iw = (a.Q - 1) * a.st + a.S;
  // Rows pitch * CH * bytes apart = pixel bytes apart modulo 128: the rows a warp's threads read
  // at once (the filter rows r of one lane) fall on different banks.
  a.pitch = a.iw;
  while (a.pitch % (128 / (CH * bytes)) != 1 % (128 / (CH * bytes))) ++a.pitch;
  // Rows a band (an even cut of P within kBandBytes) and runs a row (the groups left over): the
  // most (groups at work) x (the share of the band's x rows that are not halo).
  const size_t pixel = size_t(CH) * bytes;
  auto band_bytes = [&](int tp) {
    return (size_t((tp - 1) * a.st + a.R) * a.pitch + size_t(tp) * a.Q) * pixel;
  };
  auto runs_of = [&](int tp) {
    const int most = std::max(1, std::min(a.groups / tp, a.Q));
    const int length = (a.Q + most - 1) / most;
    return (a.Q + length - 1) / length;
  };
  auto score = [&](int tp) {
    return double(tp * runs_of(tp)) * tp / double((tp - 1) * a.st + a.R);
  };
  a.tp = 1;
  for (int tp = std::min(a.groups, a.P); tp >= 1; --tp) {
    const int cut = (a.P + tp - 1) / tp;
    if ((a.P + cut - 1) / cut != tp || (tp > 1 && band_bytes(tp) > kBandBytes)) continue;
    if (score(tp) > score(a.tp)) a.tp = tp;
  }
  const int bands = (a.P + a.tp - 1) / a.tp;
  a.ih = (a.tp - 1) * a.st + a.R;
  a.runs = runs_of(a.tp);
  a.run_length = (a.Q + a.runs - 1) / a.runs;
  a.groups = a.tp * a.runs;
  a.items = int(g.N) * bands;
  a.by_bands = FastDivmod(bands);
  const int slabs = int(g.C) / CH;
  const int64_t wanted = std::clamp<int64_t>((kBandBlocks + slabs - 1) / slabs, 1, a.items);
  a.slice_length = int((a.items + wanted - 1) / wanted);
  return a;
}

// Shared memory of a block: the band, or the groups' sums if more.
size_t band_shared_bytes(const BandArgs& a, int bytes) {
  const size_t CH = size_t(a.chunks) * 16 / bytes;
  const size_t band = (size_t(a.ih) * a.pitch + size_t(a.tp) * a.Q) * CH * bytes;
  const size_t red = size_t(a.groups) * a.R * a.S * CH * sizeof(float);
  return std::max(band, red);
}

const char* const kFilterBands = "conv2d_backward_filter (depthwise, nhwc, bands)";

template <class E, int KS, int ST>
int launch(const Conv2dGeometry& g, const void* x, const void* dy, float* partial,
           gpu::Stream stream) {
  using T = typename E::T;
  constexpr int V = band_channels(KS, E::kVec), kBytes = int(sizeof(T));
  const BandArgs a = band_args(g, V, kBytes);
  const size_t smem = band_shared_bytes(a, kBytes);
  const auto kernel = band_kernel<E, V, KS, ST>;
  if (smem > 48 * 1024) detail::set_shared_memory_limit(kernel, int(smem), kFilterBands);
  const int slices = (a.items + a.slice_length - 1) / a.slice_length;
  const int slabs = int(g.C) / (a.chunks * 16 / kBytes);
  if (slabs > 65535) {
    throw Error(std::string(kFilterBands) + ": " + std::to_string(g.C) +
                " channels are too many blocks");
  }
  kernel<<<dim3(unsigned(slices), unsigned(slabs)), kBlockThreads, smem, stream>>>(
      a, static_cast<const T*>(x), static_cast<const T*>(dy), partial);
  gpu::check_launch(kFilterBands);
  return slices;
}

template <class E>
int bands_typed(const Conv2dGeometry& g, const void* x, const void* dy, float* partial,
                gpu::Stream stream) {
  const bool one = g.stride_w == 1;
  switch (g.S) {
    case 3:
      return one ? launch<E, 3, 1>(g, x, dy, partial, stream)
                 : launch<E, 3, 2>(g, x, dy, partial, stream);
    case 5:
      return one ? launch<E, 5, 1>(g, x, dy, partial, stream)
                 : launch<E, 5, 2>(g, x, dy, partial, stream);
    default:
      return one ? launch<E, 7, 1>(g, x, dy, partial, stream)
                 : launch<E, 7, 2>(g, x, dy, partial, stream);
  }
}

}  // namespace

int filter_bands_slices(const Conv2dGeometry& g, Element type) {
  const int bytes = type == Element::f32 ? 4 : 2, vec = 16 / bytes;
  const BandArgs a = band_args(g, band_channels(int(g.S), vec), bytes);
  return (a.items + a.slice_length - 1) / a.slice_length;
}

int filter_bands(Element type, const Conv2dGeometry& g, const void* x, const void* dy,
                 float* partial, gpu::Stream stream) {
  switch (type) {
    case Element::f32:
      return bands_typed<F32>(g, x, dy, partial, stream);
    case Element::bf16:
      return bands_typed<Bf16>(g, x, dy, partial, stream);
    case Element::f16:
      return bands_typed<F16>(g, x, dy, partial, stream);
  }
  return 0;
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
