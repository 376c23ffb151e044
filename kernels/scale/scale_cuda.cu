// Scale and bias, CUDA.
//
// Every kernel is a template on the storage type T of x, y and dy (float, bf16_t, f16_t); scale,
// bias and the reduced sums are float32, the arithmetic float (one rounding at a 16-bit store).
//
// Forward (one version): one thread per element, c = (e / inner) % C; the multiply and the add
// rounded separately (no fused multiply-add) as on the CPU, so the bits agree.
//
// channel_reduce, out[c] (+)= sum_{o, i} dy * x, in double, deterministically:
//   ReduceVersion::block_per_channel  one block of kReduceThreads per channel: thread t takes the
//                                     flat positions j = t, t + 256, ... of the channel's outer *
//                                     inner, then the block adds its threads in a fixed tree.
//                                     Only C blocks: a C = 16 layer leaves most SMs idle.
//   ReduceVersion::split              each channel's positions cut into S contiguous segments
//                                     (S from the sizes alone: about 4096 positions per segment,
//                                     C * S <= 1024 blocks); block (c, s) writes a partial to the
//                                     workspace and a second kernel adds the S partials of each
//                                     channel in order. S = 1 needs no second kernel.
//                                     Rows (inner = 1: [N, C], or channels-last [N*H*W, C]):
//                                     block (tile, s) sums 32 neighbouring channels over segment s
//                                     of the rows, a warp reading 32 consecutive elements of a
//                                     row (coalesced; the per-channel walk would read each sector
//                                     once per channel), 8 warps in a fixed order.
//   ReduceVersion::planes             each channel cut into segments of about 8192 positions
//                                     (C * S <= 4096 blocks, several waves); block (c, s) walks
//                                     its segment plane piece by plane piece (contiguous), its
//                                     threads striding with 16-byte loads where aligned: one
//                                     division per piece, where split's `j / inner` was a 64-bit
//                                     division per element (its bound: 0.43 ms for both sums on
//                                     [64, 256, 56, 56]). inner < 256 takes split's kernel;
//                                     inner = 1 its rows.
#include "core/error.h"
#include "kernels/common/float16_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/common/reduce_cuda.cuh"
#include "kernels/scale/scale.h"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;

// batch_size: the elements of one batch entry (outer * C * inner) when batch > 1, whose C
// channels then follow the previous entry's (channel b C + c); 0 for one batch entry.
template <class T, class S, class Index>
__global__ void scale_forward_kernel(Index n, Index C, Index inner, Index batch_size, const T* x,
                                     const S* __restrict__ scale, const float* __restrict__ bias,
                                     T* y) {
  for (Index e = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); e < n;
       e += Index(gridDim.x) * Index(blockDim.x)) {
    const Index c = (e / inner) % C + (batch_size != 0 ? e / batch_size * C : 0);
    const float s = scale != nullptr ? to_float(scale[c]) : 1.0f;
    const float b = bias != nullptr ? bias[c] : 0.0f;
    y[e] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[e]), s), b));
  }
}

// out[c] = (accumulate ? out[c] : 0) + sum, rounded once to O.
template <class O>
__device__ inline void store_sum(O* out, int64_t c, double sum, bool accumulate) {
  out[c] = from_float<O>(accumulate ? float(double(to_float(out[c])) + sum) : float(sum));
}

// Sum of dy * x (or dy) over positions [begin, end) of channel c, strided over the block's
// threads, then over the block: valid in thread 0.
template <class T>
__device__ double channel_segment_sum(int64_t C, int64_t inner, const T* __restrict__ dy,
                                      const T* __restrict__ x, int64_t c, int64_t begin,
                                      int64_t end) {
  double acc = 0.0;
  for (int64_t j = begin + threadIdx.x; j < end; j += kReduceThreads) {
    const int64_t o = j / inner, e = (o * C + c) * inner + (j - o * inner);
    const double d = to_float(dy[e]);
    acc += x != nullptr ? d * double(to_float(x[e])) : d;
  }
  return detail::block_sum(detail::Partial{acc, 0}).value;
}

// v1: block c sums channel c.
template <class T, class O>
__global__ void reduce_block_per_channel(int64_t outer, int64_t C, int64_t inner,
                                         const T* __restrict__ dy, const T* __restrict__ x,
                                         bool accumulate, O* __restrict__ out) {
  const int64_t c = blockIdx.x;
  const double sum = channel_segment_sum(C, inner, dy, x, c, 0, outer * inner);
  if (threadIdx.x == 0) store_sum(out, c, sum, accumulate);
}

// v2, first pass: block (c, s) sums segment s of channel c into partials[c * S + s], or, with
// S = 1, finishes the channel itself.
template <class T, class O>
__global__ void reduce_split(int64_t outer, int64_t C, int64_t inner, int64_t segment, int S,
                             const T* __restrict__ dy, const T* __restrict__ x, bool accumulate,
                             double* __restrict__ partials, O* __restrict__ out) {
  const int64_t c = blockIdx.x, s = blockIdx.y, total = outer * inner;
  const int64_t begin = s * segment, end = begin + segment < total ? begin + segment : total;
  const double sum = channel_segment_sum(C, inner, dy, x, c, begin, end);
  if (threadIdx.x != 0) return;
  if (S == 1) {
    store_sum(out, c, sum, accumulate);
  } else {
    partials[c * S + s] = sum;
  }
}

// v2, second pass: one thread per channel adds its S partials in segment order.
template <class O>
__global__ void reduce_split_finish(int64_t C, int S, const double* __restrict__ partials,
                                    bool accumulate, O* __restrict__ out) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  double sum = 0.0;
  for (int s = 0; s < S; ++s) sum += partials[c * S + s];
  store_sum(out, c, sum, accumulate);
}

// v3 (planes), first pass: block (c, s) sums positions [s segment, (s + 1) segment) of channel
// c (position j = o inner + i: element i of plane o, at (o C + c) inner + i) piece by piece, a
// piece being the segment's part of one plane: contiguous, so the block's threads stride over it
// with no division per element, an item being V elements (16 bytes when V > 1: inner % V == 0,
// segment % 8 == 0 and 16-byte aligned tensors). The block adds its threads in the fixed tree.
// Writes partials[c S + s], or with S = 1 out[c].
template <int V, class T, class O>
__global__ void reduce_planes(int64_t outer, int64_t C, int64_t inner, int64_t segment, int S,
                              const T* __restrict__ dy, const T* __restrict__ x, bool accumulate,
                              double* __restrict__ partials, O* __restrict__ out) {
  const int64_t c = blockIdx.x, s = blockIdx.y, total = outer * inner;
  const int64_t begin = s * segment, end = begin + segment < total ? begin + segment : total;
  double acc = 0.0;
  for (int64_t j = begin; j < end;) {
    const int64_t o = j / inner, plane_end = (o + 1) * inner;
    const int64_t stop = plane_end < end ? plane_end : end;
    const int64_t shift = o * (C - 1) * inner + c * inner;  // position p is at element p + shift
#pragma unroll 2
    for (int64_t i = j + int64_t(threadIdx.x) * V; i < stop; i += int64_t(kReduceThreads) * V) {
      float d[V], v[V];
      load_floats(dy, shift + i, d);
      if (x != nullptr) load_floats(x, shift + i, v);
#pragma unroll
      for (int e = 0; e < V; ++e) acc += x != nullptr ? double(d[e]) * double(v[e]) : double(d[e]);
    }
    j = stop;
  }
  const double sum = detail::block_sum(detail::Partial{acc, 0}).value;
  if (threadIdx.x != 0) return;
  if (S == 1) {
    store_sum(out, c, sum, accumulate);
  } else {
    partials[c * S + s] = sum;
  }
}

// Rows, first pass: block (tile, s, b) sums channels c = 32 tile + lane of batch entry b (rows
// rows of C each) over rows [s segment, (s + 1) segment), warp w taking rows w, w + 8, ...; the 8
// warps' sums are added in warp order. Writes partials[(b C + c) S + s], or with S = 1 finishes
// the channel, out[b C + c].
template <class T, class O>
__global__ void reduce_rows(int64_t rows, int64_t C, int64_t segment, int S,
                            const T* __restrict__ dy, const T* __restrict__ x, bool accumulate,
                            double* __restrict__ partials, O* __restrict__ out) {
  constexpr int kWarps = kReduceThreads / 32;
  __shared__ double sums[kWarps][32];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t b = blockIdx.z;
  dy += b * rows * C;
  if (x != nullptr) x += b * rows * C;
  const int64_t c = int64_t(blockIdx.x) * 32 + lane, s = blockIdx.y;
  const int64_t begin = s * segment, end = begin + segment < rows ? begin + segment : rows;
  double acc = 0.0;
  if (c < C) {
    for (int64_t r = begin + warp; r < end; r += kWarps) {
      const double d = to_float(dy[r * C + c]);
      acc += x != nullptr ? d * double(to_float(x[r * C + c])) : d;
    }
  }
  sums[warp][lane] = acc;
  __syncthreads();
  if (warp != 0 || c >= C) return;
  double sum = 0.0;
  for (int w = 0; w < kWarps; ++w) sum += sums[w][lane];
  if (S == 1) {
    store_sum(out, b * C + c, sum, accumulate);
  } else {
    partials[(b * C + c) * S + s] = sum;
  }
}

constexpr int64_t kSegmentPositions = 4096;
constexpr int64_t kMaxSplitBlocks = 1024;

// Segments per channel for the split version: a function of the sizes only (determinism).
int split_segments(int64_t outer, int64_t C, int64_t inner) {
  const int64_t by_work = (outer * inner + kSegmentPositions - 1) / kSegmentPositions;
  const int64_t by_blocks = kMaxSplitBlocks / (C > 0 ? C : 1);
  const int64_t S = by_work < by_blocks ? by_work : by_blocks;
  return int(S < 1 ? 1 : S);
}

// Segments for the planes version: about 8192 positions each, C * S <= 4096 blocks (several
// waves, so that blocks that do not fit in one wave leave little tail), each a multiple of 8
// positions (whole 16-byte items for float and 16-bit types); a function of the sizes only.
struct Segments {
  int S;
  int64_t segment;
};

Segments plane_segments(int64_t outer, int64_t C, int64_t inner) {
  constexpr int64_t kPositions = 8192, kMaxBlocks = 4096;
  const int64_t total = outer * inner;
  const int64_t by_work = (total + kPositions - 1) / kPositions;
  const int64_t by_blocks = kMaxBlocks / (C > 0 ? C : 1);
  int64_t S = by_work < by_blocks ? by_work : by_blocks;
  if (S < 1) S = 1;
  const int64_t segment = ((total + S - 1) / S + 7) / 8 * 8;
  return {int(segment > 0 ? (total + segment - 1) / segment : 1), segment};
}

// The planes version takes planes of at least this many elements (shorter pieces would idle most
// of a block); shorter ones take split's kernel.
constexpr int64_t kMinPlane = 256;

// Row segments for the rows version: about 2048 rows a block, at most kMaxSplitBlocks blocks
// over the batch's entries.
int row_segments(int64_t batch, int64_t rows, int64_t C) {
  const int64_t tiles = (C + 31) / 32 * (batch > 0 ? batch : 1);
  const int64_t by_work = (rows + 2047) / 2048;
  const int64_t by_blocks = kMaxSplitBlocks / tiles;
  const int64_t S = by_work < by_blocks ? by_work : by_blocks;
  return int(S < 1 ? 1 : S);
}

}  // namespace

template <class T, class S>
void scale_forward(int64_t batch, int64_t outer, int64_t C, int64_t inner, const T* x,
                   const S* scale, const float* bias, T* y, gpu::Stream stream) {
  const int64_t per_entry = outer * C * inner, n = batch * per_entry;
  if (n == 0) return;
  const int64_t batch_size = batch > 1 ? per_entry : 0;
  const int blocks = detail::map_blocks(n);
  if (detail::int32_indexable(n)) {
    scale_forward_kernel<T, S, int32_t><<<blocks, detail::kMapThreads, 0, stream>>>(
        int32_t(n), int32_t(C), int32_t(inner), int32_t(batch_size), x, scale, bias, y);
  } else {
    scale_forward_kernel<T, S, int64_t>
        <<<blocks, detail::kMapThreads, 0, stream>>>(n, C, inner, batch_size, x, scale, bias, y);
  }
  gpu::check_launch("scale_forward");
}

template <class T>
void scale_forward(int64_t outer, int64_t C, int64_t inner, const T* x, const float* scale,
                   const float* bias, T* y, gpu::Stream stream) {
  scale_forward<T, float>(1, outer, C, inner, x, scale, bias, y, stream);
}

size_t channel_reduce_workspace_bytes(int64_t batch, int64_t outer, int64_t C, int64_t inner,
                                      ReduceVersion version) {
  if (version == ReduceVersion::block_per_channel) return 0;
  const int S = inner == 1 ? row_segments(batch, outer, C)
                : version == ReduceVersion::planes && inner >= kMinPlane
                    ? plane_segments(outer, C, inner).S
                    : split_segments(outer, C, inner);
  return S > 1 ? size_t(batch * C) * size_t(S) * sizeof(double) : 0;
}

size_t channel_reduce_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                      ReduceVersion version) {
  return channel_reduce_workspace_bytes(1, outer, C, inner, version);
}

template <class T, class O>
void channel_reduce(int64_t batch, int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, O* out, void* workspace, ReduceVersion version,
                    gpu::Stream stream) {
  if (C == 0 || batch == 0) return;
  const bool rows = inner == 1 && version != ReduceVersion::block_per_channel;
  const bool planes = version == ReduceVersion::planes && inner >= kMinPlane;
  CREMA_CHECK(batch == 1 || rows, "channel_reduce: a batch of channel sets needs rows (inner 1)");
  if (version == ReduceVersion::block_per_channel) {
    reduce_block_per_channel<<<unsigned(C), kReduceThreads, 0, stream>>>(outer, C, inner, dy, x,
                                                                         accumulate, out);
    gpu::check_launch("channel_reduce");
    return;
  }
  const int S = rows     ? row_segments(batch, outer, C)
                : planes ? plane_segments(outer, C, inner).S
                         : split_segments(outer, C, inner);
  CREMA_CHECK(S == 1 || workspace != nullptr, "channel_reduce: split needs its workspace");
  double* partials = static_cast<double*>(workspace);
  if (rows) {
    const int64_t segment = (outer + S - 1) / S;
    const dim3 grid(unsigned((C + 31) / 32), unsigned(S), unsigned(batch));
    reduce_rows<<<grid, kReduceThreads, 0, stream>>>(outer, C, segment, S, dy, x, accumulate,
                                                     partials, out);
  } else if (planes) {
    const int64_t segment = plane_segments(outer, C, inner).segment;
    const dim3 grid{unsigned(C), unsigned(S)};
    constexpr int V = kPerVector<T>;
    if (inner % V == 0 && detail::aligned16(dy) && detail::aligned16(x)) {
      reduce_planes<V><<<grid, kReduceThreads, 0, stream>>>(outer, C, inner, segment, S, dy, x,
                                                            accumulate, partials, out);
    } else {
      reduce_planes<1><<<grid, kReduceThreads, 0, stream>>>(outer, C, inner, segment, S, dy, x,
                                                            accumulate, partials, out);
    }
  } else {
    const int64_t segment = (outer * inner + S - 1) / S;
    reduce_split<<<dim3(unsigned(C), unsigned(S)), kReduceThreads, 0, stream>>>(
        outer, C, inner, segment, S, dy, x, accumulate, partials, out);
  }
  gpu::check_launch("channel_reduce");
  if (S > 1) {
    const int threads = 128;
    const int64_t channels = batch * C;
    reduce_split_finish<<<unsigned((channels + threads - 1) / threads), threads, 0, stream>>>(
        channels, S, static_cast<const double*>(workspace), accumulate, out);
    gpu::check_launch("channel_reduce (finish)");
  }
}

template <class T>
void channel_reduce(int64_t outer, int64_t C, int64_t inner, const T* dy, const T* x,
                    bool accumulate, float* out, void* workspace, ReduceVersion version,
                    gpu::Stream stream) {
  channel_reduce<T, float>(1, outer, C, inner, dy, x, accumulate, out, workspace, version, stream);
}

#define CREMA_SCALE_INSTANTIATE(T, S)                                                              \
  template void scale_forward<T, S>(int64_t, int64_t, int64_t, int64_t, const T*, const S*,        \
                                    const float*, T*, gpu::Stream);                                \
  template void channel_reduce<T, S>(int64_t, int64_t, int64_t, int64_t, const T*, const T*, bool, \
                                     S*, void*, ReduceVersion, gpu::Stream);
CREMA_SCALE_INSTANTIATE(float, float)
CREMA_SCALE_INSTANTIATE(bf16_t, float)
CREMA_SCALE_INSTANTIATE(f16_t, float)
CREMA_SCALE_INSTANTIATE(bf16_t, bf16_t)
CREMA_SCALE_INSTANTIATE(f16_t, f16_t)
#undef CREMA_SCALE_INSTANTIATE
#define CREMA_SCALE_INSTANTIATE(T)                                                                \
  template void scale_forward<T>(int64_t, int64_t, int64_t, const T*, const float*, const float*, \
                                 T*, gpu::Stream);                                                \
  template void channel_reduce<T>(int64_t, int64_t, int64_t, const T*, const T*, bool, float*,    \
                                  void*, ReduceVersion, gpu::Stream);
CREMA_SCALE_INSTANTIATE(float)
CREMA_SCALE_INSTANTIATE(bf16_t)
CREMA_SCALE_INSTANTIATE(f16_t)
#undef CREMA_SCALE_INSTANTIATE

}  // namespace crema::kernels::cuda
