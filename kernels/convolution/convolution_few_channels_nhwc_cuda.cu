// The few-channel channels-last backward data, direct (convolution_few_channels_nhwc.h).
//
// Block b covers, for one output phase (ph_h, ph_w) and one group of 4 channels, a tile of the
// phase's plane -- i in [i0, i0 + BI), j in [j0, j0 + BJ) -- of `images` consecutive images
// (one image where the plane is large; several whole planes where it is small). Thread (image,
// row group g, column j) sums the outputs i = i0 + 4g .. +3 at column j, 4 channels each.
//
// The phase's taps: r = r_first + stride_h a (a = 0 .. taps_r - 1) reads dy row p = i + off(r)
// with off(r) = (ph_h + pad_h - r) / stride_h exact, which falls by one from one tap to the next.
// So the rows a thread's 4 outputs read over all taps_r taps are 4 + taps_r - 1 consecutive rows
// of dy, the same for every filter column s: the window it keeps in registers (kWindow rows, a
// compile-time NR >= taps_r so that every register index is a constant).
//
// Per k chunk (KC = 16, 8 or 4 channels of dy): the block stages dy's window -- rows p0 .. p0 +
// WR - 1 with p0 = i0 + off(r_last), columns q0 .. q0 + WC - 1 likewise, zero outside the image
// and past K -- as fp32 [image][row][column][KP] (KP: KC or KC + 4, so that KP / 4 is odd), and
// the phase's taps of the filter, [kc][tap][4 channels] from the packed filter in the workspace
// (fp32, zero past C and K, packed once a call); then each thread walks the phase's
// filter columns, and for each 4 channels of the chunk loads its window's rows as float4s (lanes
// on consecutive columns, KP floats apart: no bank conflicts) and adds every tap of the column,
// the filter's 4 channels of each k one broadcast float4: 4 x 4 x taps FMAs a window row. The
// copies load up to 16 bytes of dy at once (K and dy's alignment permitting) with kBatch loads in
// flight a thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_depthwise_nhwc.cuh"
#include "kernels/convolution/convolution_few_channels_nhwc.h"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::few_channels_nhwc {
namespace {

using depthwise_nhwc::Bf16;
using depthwise_nhwc::F16;
using depthwise_nhwc::F32;

constexpr int kRows = 4;             // output rows a thread
constexpr int kChannels = 4;         // channels a thread (one float4 of the staged filter)
constexpr int kMaxThreads = 256;     // a block
constexpr int kMaxColumns = 32;      // BJ: a tile's columns, at most a warp's lanes
constexpr int kMaxTapsAColumn = 24;  // NR at most
// Shared memory a block may take: two blocks an SM on an H100/H200 (228 KB each); less where the
// current device lets a block have less (shared_budget).
constexpr int kSharedBudget = 96 << 10;
// Blocks a launch should have at least, where the work allows: two an SM of an H100/H200.
constexpr int64_t kBlocksWanted = 264;

// The taps of one filter dimension that reach the outputs of phase `phase`: count of them, the
// first and last, and the dy offset of the last (the smallest).
struct Taps {
  int count, first, last, off_min;
};
__host__ __device__ inline Taps taps_of(int phase, int pad, int stride, int extent) {
  Taps t;
  t.first = (phase + pad) % stride;
  t.count = t.first < extent ? (extent - 1 - t.first) / stride + 1 : 0;
  t.last = t.first + (t.count - 1) * stride;
  t.off_min = (phase + pad - t.last) / stride;  // exact: phase + pad - last is a multiple
  return t;
}

// The launch: geometry, the tile and the staged window (host-computed, passed by value).
struct Plan {
  int N, H, W, C, K, P, Q, R, S;
  int stride_h, stride_w, pad_h, pad_w;
  int groups;         // channel groups of kChannels
  int phases;         // stride_h * stride_w
  int BJ, RG, BI;     // a tile's columns, row groups (of kRows) and rows (RG * kRows)
  int images;         // images a block
  int IT, JT, IG;     // tiles along i, along j, image groups
  int WR, WC;         // the staged window: rows, columns
  int KC, KP;         // dy channels a chunk (4, 8 or 16), floats a staged pixel (KP / 4 odd)
  int filter_offset;  // floats from the window's start to the staged filter (16-byte aligned)
  int threads;
  int64_t blocks;
  int nr;        // the template's NR (4, 8 or 24)
  int vector;    // the template's V: dy elements a staging load (1, 2, 4 or 8)
  int rounding;  // f32 operands: 0 as stored, 1 to tf32, 2 to bf16 (Operands)

  // The most taps one phase has (the staged filter holds a phase's taps only).
  int phase_taps() const {
    return ((R + stride_h - 1) / stride_h) * ((S + stride_w - 1) / stride_w);
  }
  size_t shared_bytes() const {
    return (size_t(filter_offset) + size_t(phase_taps()) * KC * kChannels) * sizeof(float);
  }
};

// kSharedBudget, or what the current device lets a block opt in to where that is less (48 KB
// without a device).
int shared_budget() {
  int device = 0, most = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();  // clear it: the plan stands on the default
    return 48 << 10;
  }
  return std::min(kSharedBudget, most);
}

// The plan for dy loads of at most `vector` elements (vector_for's: 16 bytes of E, 2 or 1).
Plan plan_of(const Conv2dGeometry& g, int vector) {
  const size_t budget = size_t(shared_budget());
  Plan a{};
  a.N = int(g.N), a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.K = int(g.K);
  a.P = int(g.P()), a.Q = int(g.Q()), a.R = int(g.R), a.S = int(g.S);
  a.stride_h = int(g.stride_h), a.stride_w = int(g.stride_w);
  a.pad_h = int(g.pad_h), a.pad_w = int(g.pad_w);
  a.groups = int(ceil_div(a.C, kChannels));
  a.phases = a.stride_h * a.stride_w;
  // The largest phase's plane, and the most taps of one filter row or column a phase has.
  const int hp = int(ceil_div(a.H, a.stride_h)), wp = int(ceil_div(a.W, a.stride_w));
  const int taps_r = int(ceil_div(a.R, a.stride_h)), taps_s = int(ceil_div(a.S, a.stride_w));
  a.nr = taps_r <= 4 ? 4 : taps_r <= 8 ? 8 : 24;
  a.JT = int(ceil_div(wp, kMaxColumns));
  a.BJ = int(ceil_div(wp, a.JT));
  const int most_groups = kMaxThreads / a.BJ, plane_groups = int(ceil_div(hp, kRows));
  if (plane_groups <= most_groups) {  // whole planes, as many images as the block holds
    a.IT = 1;
    a.RG = plane_groups;
    // As many images as the block holds, but enough blocks for two an SM (of 132) where the
    // layer has that many planes.
    const int64_t planes = int64_t(a.phases) * a.groups * a.JT * a.N;
    a.images = int(std::clamp<int64_t>(planes / kBlocksWanted, 1, most_groups / plane_groups));
    a.images = std::min(a.images, a.N);
  } else {
    a.IT = int(ceil_div(plane_groups, most_groups));
    a.RG = int(ceil_div(plane_groups, a.IT));
    a.images = 1;
  }
  a.BI = a.RG * kRows;
  a.IG = int(ceil_div(a.N, a.images));
  a.threads = int(ceil_div(a.BJ * a.RG * a.images, 32)) * 32;
  a.WR = a.BI + a.nr - 1;
  // Lanes on consecutive columns read 16 bytes each, KP floats apart: with KP / 4 odd the 8 lanes
  // of a quarter warp hit 8 different 16-byte bank groups. Where a tile is narrower than a warp,
  // the next row group's lanes read kRows * WC pixels on: a width with kRows * WC = BJ (mod 8)
  // continues the groups.
  a.WC = a.BJ + taps_s - 1;
  if (a.BJ < kMaxColumns && a.BJ % 4 == 0) {
    while ((kRows * a.WC - a.BJ) % 8 != 0) ++a.WC;
  }
  a.KC = 0;
  for (int kc = 16; kc >= 4 && a.KC == 0; kc /= 2) {
    a.KC = kc;
    a.KP = kc / 4 % 2 == 1 ? kc : kc + 4;
    a.filter_offset = a.images * a.WR * a.WC * a.KP;
    if (a.shared_bytes() > budget) a.KC = 0;
  }
  a.blocks = int64_t(a.phases) * a.groups * a.JT * a.IT * a.IG;
  // The widest load that divides K (and the chunk), pointer alignment permitting (the caller's):
  // 16 bytes, else 2 elements, else 1.
  a.vector = vector;
  if (a.K % a.vector != 0 || a.vector > a.KC) a.vector = std::min(vector, 2);
  if (a.K % a.vector != 0) a.vector = 1;
  return a;
}

// Loads a thread keeps in flight while staging (the copies' latency is paid once a batch).
constexpr int kBatch = 8;

// An operand as the plan's math reads it (Operands): tf32 to nearest with ties away from zero
// (cvt.rna's), bf16 to nearest even; the low bits cleared.
__device__ __forceinline__ float operand(float v, int rounding) {
  const uint32_t u = __float_as_uint(v);
  if (rounding == 1) return __uint_as_float((u + 0x1000u) & 0xffffe000u);
  if (rounding == 2) return __uint_as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  return v;
}

// V consecutive elements of a tensor of E as raw 32-bit words (V = 1: one 16-bit element in
// the low half), loaded at once: 2, 4, 8 or 16 bytes.
template <class E, int V>
struct Raw {
  using T = typename E::T;
  static constexpr int kBytes = V * int(sizeof(T)), kWords = kBytes < 4 ? 1 : kBytes / 4;
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16, "2 to 16 bytes");
  uint32_t words[kWords];

  __device__ void zero() {
#pragma unroll
    for (int i = 0; i < kWords; ++i) words[i] = 0u;
  }
  __device__ void load(const T* p) {
    if constexpr (kBytes == 16) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
      words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
    } else if constexpr (kBytes == 8) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
      words[0] = v.x, words[1] = v.y;
    } else if constexpr (kBytes == 4) {
      words[0] = __ldg(reinterpret_cast<const unsigned*>(p));
    } else {
      words[0] = __ldg(reinterpret_cast<const unsigned short*>(p));
    }
  }
  // Element x, widened (+0 after zero()).
  __device__ float at(int x) const {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(words[x]);
    } else {
      return E::widen(T(words[x / 2] >> (16 * (x % 2)) & 0xffffu));
    }
  }
};

// The k chunk k0 .. k0 + KC - 1 of dy's window into `staged` ([image][row][column][KP], fp32,
// zeros outside the image and past K). A thread keeps one of a pixel's KC / V vectors (KC / V
// divides 32 and the block is whole warps) and walks pixels (image, row, column) `step` at a time
// without divisions, kBatch loads in flight before their stores.
template <class E, int V>
__device__ void stage_window(const Plan& a, const typename E::T* __restrict__ dy, int n0, int p0,
                             int q0, int k0, float* staged) {
  const int vectors = a.KC / V, step = int(blockDim.x) / vectors;
  const int kv = int(threadIdx.x) % vectors, k = k0 + kv * V;
  const int pixel = int(threadIdx.x) / vectors;
  int col = pixel % a.WC, row = pixel / a.WC % a.WR, img = pixel / a.WC / a.WR;
  float* to = staged + kv * V;
  while (img < a.images) {
    Raw<E, V> raw[kBatch];
    int at[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      at[u] = -1;
      raw[u].zero();
      if (img >= a.images) continue;
      const int n = n0 + img, p = p0 + row, q = q0 + col;
      at[u] = ((img * a.WR + row) * a.WC + col) * a.KP;
      if (n < a.N && p >= 0 && p < a.P && q >= 0 && q < a.Q && k < a.K) {
        raw[u].load(dy + ((int64_t(n) * a.P + p) * a.Q + q) * a.K + k);
      }
      col += step;
      while (col >= a.WC) col -= a.WC, ++row;
      while (row >= a.WR) row -= a.WR, ++img;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (at[u] < 0) continue;
      float* dst = to + at[u];
      float v[V];
#pragma unroll
      for (int x = 0; x < V; ++x) {
        v[x] = raw[u].at(x);
        if constexpr (sizeof(typename E::T) == 4) v[x] = operand(v[x], a.rounding);
      }
      if constexpr (V >= 4) {
#pragma unroll
        for (int x = 0; x < V; x += 4) {
          *reinterpret_cast<float4*>(dst + x) = make_float4(v[x], v[x + 1], v[x + 2], v[x + 3]);
        }
      } else if constexpr (V == 2) {
        *reinterpret_cast<float2*>(dst) = make_float2(v[0], v[1]);
      } else {
        *dst = v[0];
      }
    }
  }
}

// The filter packed for the kernel: [group][k][tap][kChannels] fp32, k up to a multiple of
// kChunkMost and channels past C zero, so that any chunk of it is one contiguous run of float4s.
constexpr int kChunkMost = 16;
__host__ __device__ inline int padded_k(int K) {
  return (K + kChunkMost - 1) / kChunkMost * kChunkMost;
}

template <class E>
__global__ void pack_filter_kernel(const Plan a, const typename E::T* __restrict__ w,
                                   float* __restrict__ packed) {
  const int taps = a.R * a.S, kp = padded_k(a.K);
  const int64_t total = int64_t(a.groups) * kp * taps * kChannels;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(e % kChannels), tap = int(e / kChannels % taps);
    const int k = int(e / kChannels / taps % kp), group = int(e / kChannels / taps / kp);
    const int channel = group * kChannels + c;
    packed[e] = k < a.K && channel < a.C
                    ? operand(E::widen(w[(int64_t(k) * taps + tap) * a.C + channel]), a.rounding)
                    : 0.0f;
  }
}

// The filter's chunk k0 .. k0 + KC - 1 of channel group `group`, the phase's taps only (rows
// tr, columns ts), into `filter` ([kc][ta][si][4]: ta counts rows from the last, as the window
// does, si columns from the first): float4s of the packed filter, kBatch in flight a thread.
__device__ void stage_filter(const Plan& a, const float* __restrict__ packed, int group, int k0,
                             const Taps& tr, const Taps& ts, float* filter) {
  const int count = a.KC * tr.count * ts.count, taps = a.R * a.S;
  const float4* from =
      reinterpret_cast<const float4*>(packed) + (int64_t(group) * padded_k(a.K) + k0) * taps;
  float4* to = reinterpret_cast<float4*>(filter);
  for (int first = int(threadIdx.x); first < count; first += kBatch * int(blockDim.x)) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = first + u * int(blockDim.x);
      if (e >= count) continue;
      const int si = e % ts.count, ta = e / ts.count % tr.count, kc = e / ts.count / tr.count;
      const int r = tr.last - ta * a.stride_h, s = ts.first + si * a.stride_w;
      v[u] = __ldg(from + kc * taps + r * a.S + s);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = first + u * int(blockDim.x);
      if (e < count) to[e] = v[u];
    }
  }
}

// CU: the channels a thread sums (1 or 3 where C is 1, 2 or 3: one group; else 4).
template <class E, int NR, int V, int CU>
__global__ void __launch_bounds__(kMaxThreads, 2)
    data_kernel(const Plan a, const typename E::T* __restrict__ dy,
                const float* __restrict__ packed, typename E::T* __restrict__ dx) {
  constexpr int kWindow = kRows + NR - 1;
  extern __shared__ float4 shared4[];
  float* staged = reinterpret_cast<float*>(shared4);  // [image][row][column][KP]
  const float* filter = staged + a.filter_offset;     // [kc][ta][si][kChannels]

  int64_t b = blockIdx.x;  // the phase fastest: neighbouring blocks read the same window
  const int phase = int(b % a.phases);
  b /= a.phases;
  const int group = int(b % a.groups);
  b /= a.groups;
  const int jt = int(b % a.JT);
  b /= a.JT;
  const int it = int(b % a.IT);
  const int n0 = int(b / a.IT) * a.images;
  const int ph_h = phase / a.stride_w, ph_w = phase % a.stride_w;
  const Taps tr = taps_of(ph_h, a.pad_h, a.stride_h, a.R);
  const Taps ts = taps_of(ph_w, a.pad_w, a.stride_w, a.S);
  const int i0 = it * a.BI, j0 = jt * a.BJ;
  const int p0 = i0 + tr.off_min, q0 = j0 + ts.off_min;

  const int column = int(threadIdx.x) % a.BJ, row_group = int(threadIdx.x) / a.BJ % a.RG,
            image = int(threadIdx.x) / a.BJ / a.RG;
  const bool active = image < a.images;
  float acc[kRows][CU] = {};

  for (int k0 = 0; tr.count > 0 && ts.count > 0 && k0 < a.K; k0 += a.KC) {
    __syncthreads();  // the last chunk's reads are done
    stage_window<E, V>(a, dy, n0, p0, q0, k0, staged);
    stage_filter(a, packed, group, k0, tr, ts, staged + a.filter_offset);
    __syncthreads();
    if (!active) continue;
    const int chunk = min(a.KC, a.K - k0);  // past it the window and the filter hold zeros
    const int row_pitch = a.WC * a.KP, phase_taps = tr.count * ts.count;
    for (int si = 0; si < ts.count; ++si) {
      // Output column j reads dy column j + off(s); off(s) - off_min = count - 1 - si.
      const float* rows =
          staged + ((image * a.WR + row_group * kRows) * a.WC + column + ts.count - 1 - si) * a.KP;
      for (int kq = 0; kq < chunk; kq += 4) {
        float4 win[kWindow];  // 4 channels of each row
#pragma unroll
        for (int x = 0; x < kWindow; ++x) {
          win[x] = *reinterpret_cast<const float4*>(rows + x * row_pitch + kq);
        }
        // Tap a (from the last, whose offset is the smallest) reads window row t + a for
        // output row t.
#pragma unroll
        for (int ta = 0; ta < NR; ++ta) {
          if (ta >= tr.count) break;
          const float* taps = filter + ((kq * tr.count + ta) * ts.count + si) * kChannels;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float4 f = *reinterpret_cast<const float4*>(taps + e * phase_taps * kChannels);
#pragma unroll
            for (int t = 0; t < kRows; ++t) {
              const float4& v = win[t + ta];
              const float d = e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
              const float fc[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
              for (int c = 0; c < CU; ++c) acc[t][c] += d * fc[c];
            }
          }
        }
      }
    }
  }

  // Every output of the tile is written, zeros where the phase has no tap.
  const int hp = (a.H - ph_h + a.stride_h - 1) / a.stride_h;
  const int wp = (a.W - ph_w + a.stride_w - 1) / a.stride_w;
  const int n = n0 + image, j = j0 + column;
  if (!active || n >= a.N || j >= wp) return;
  const int w_at = ph_w + j * a.stride_w;
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    const int i = i0 + row_group * kRows + t;
    if (i >= hp) break;
    const int h = ph_h + i * a.stride_h;
    typename E::T* out = dx + ((int64_t(n) * a.H + h) * a.W + w_at) * a.C + group * kChannels;
#pragma unroll
    for (int c = 0; c < CU; ++c) {
      if (group * kChannels + c < a.C) out[c] = E::narrow(acc[t][c]);
    }
  }
}

constexpr const char* kWhat = "conv2d backward data (few channels, direct)";

template <class E, int NR, int V, int CU>
void launch(const Plan& a, const void* dy, const float* packed, void* dx, gpu::Stream stream) {
  const auto kernel = data_kernel<E, NR, V, CU>;
  const int bytes = int(a.shared_bytes());
  if (bytes > 48 << 10) detail::set_shared_memory_limit(kernel, bytes, kWhat);
  using T = typename E::T;
  kernel<<<unsigned(a.blocks), unsigned(a.threads), size_t(bytes), stream>>>(
      a, static_cast<const T*>(dy), packed, static_cast<T*>(dx));
  gpu::check_launch(kWhat);
}

template <class E, int NR, int V>
void launch(const Plan& a, const void* dy, const float* packed, void* dx, gpu::Stream stream) {
  if (a.C == 1) return launch<E, NR, V, 1>(a, dy, packed, dx, stream);
  if (a.C <= 3) return launch<E, NR, V, 3>(a, dy, packed, dx, stream);
  launch<E, NR, V, 4>(a, dy, packed, dx, stream);
}

template <class E, int V>
void launch(const Plan& a, const void* dy, const float* packed, void* dx, gpu::Stream stream) {
  if (a.nr == 4) return launch<E, 4, V>(a, dy, packed, dx, stream);
  if (a.nr == 8) return launch<E, 8, V>(a, dy, packed, dx, stream);
  launch<E, 24, V>(a, dy, packed, dx, stream);
}

// The filter packed into the workspace, then the kernel with the widest loads of dy it takes.
template <class E>
void run(const Plan& a, const void* dy, const void* w, void* dx, void* workspace,
         gpu::Stream stream) {
  auto* packed = static_cast<float*>(workspace);
  const int64_t packed_floats = int64_t(a.groups) * padded_k(a.K) * a.R * a.S * kChannels;
  pack_filter_kernel<E><<<blocks_for(packed_floats), kThreads, 0, stream>>>(
      a, static_cast<const typename E::T*>(w), packed);
  gpu::check_launch(kWhat);
  // 16 bytes (8 16-bit values, 4 floats), 4 bytes, or one element.
  if (a.vector == 1) return launch<E, 1>(a, dy, packed, dx, stream);
  if (a.vector == 2) return launch<E, 2>(a, dy, packed, dx, stream);
  launch<E, 16 / int(sizeof(typename E::T))>(a, dy, packed, dx, stream);
}

// The widest load of dy (elements) its alignment allows: 16 bytes, 2 elements or 1.
int vector_for(const void* dy, int element_bytes) {
  const auto at = reinterpret_cast<uintptr_t>(dy);
  return at % 16 == 0 ? 16 / element_bytes : at % uintptr_t(2 * element_bytes) == 0 ? 2 : 1;
}

}  // namespace

bool fits(const Conv2dGeometry& g) {
  if (g.groups != 1 || g.C >= 32 || g.dilation_h != 1 || g.dilation_w != 1) return false;
  if ((g.R + g.stride_h - 1) / g.stride_h > kMaxTapsAColumn) return false;
  const Plan a = plan_of(g, 1);  // the vector changes neither the window nor the chunk
  return a.KC > 0 && a.blocks < (int64_t(1) << 31);
}

size_t workspace_bytes(const Conv2dGeometry& g) {
  const int64_t groups = (g.C + kChannels - 1) / kChannels;
  return size_t(groups * padded_k(int(g.K)) * g.R * g.S * kChannels) * sizeof(float);
}

void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   void* workspace, gpu::Stream stream, Operands operands) {
  if (!fits(g)) throw Error(std::string(kWhat) + ": the geometry does not fit");
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    throw Error(std::string(kWhat) + ": needs a 16-byte aligned workspace (workspace_bytes)");
  }
  if (operands != Operands::stored && type != Element::f32) {
    throw Error(std::string(kWhat) + ": only f32 tensors' operands are rounded");
  }
  Plan a = plan_of(g, vector_for(dy, type == Element::f32 ? 4 : 2));
  a.rounding = operands == Operands::tf32 ? 1 : operands == Operands::bf16 ? 2 : 0;
  switch (type) {
    case Element::f32:
      return run<F32>(a, dy, w, dx, workspace, stream);
    case Element::bf16:
      return run<Bf16>(a, dy, w, dx, workspace, stream);
    case Element::f16:
      return run<F16>(a, dy, w, dx, workspace, stream);
  }
}

}  // namespace crema::kernels::cuda::few_channels_nhwc
