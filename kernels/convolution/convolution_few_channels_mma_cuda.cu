// The few-channel stride-1 backward data on mma.sync (convolution_few_channels_mma.h).
//
// Shared memory of a block: the packed filter [R*S][CP][KP] (CP: C rounded up to 8; KP, the
// pitch: K padded to a whole 32-byte k step, plus 16 bytes, so that a row is an odd number of
// 16-byte units and any 8 consecutive rows -- 8 channels of the filter, 8 pixels of a window --
// sit in 8 different bank groups for ldmatrix), then two windows [WR][WC][KP].
//
// A tile of dx is rows h0 .. h0 + BI - 1 of one image, all W columns, all C channels: M = BI * W
// pixels, pixel m = (h0 + m / W, m % W). Its window holds dy rows p0 = h0 + pad_h - (R - 1) ..
// p0 + WR - 1 (WR = BI + R - 1) and columns q0 = pad_w - (S - 1) .. q0 + WC - 1 (WC = W + S - 1),
// zeros outside the image, so that output (h, w) reads tap (r, s) at window pixel
// (h - h0 + R - 1 - r, w + S - 1 - s): a pixel's row address for tap (r, s) is its own base
// minus (r * WC + s) rows -- the same offset for every pixel of the tile.
//
// Warp w takes m-tiles w * MT .. (MT = 2 at once where that still makes 4 warps or more: the B
// fragments of a k step feed both; else one, for more warps) and, per
// tap and 32-byte k step, loads each m-tile's A fragment with one ldmatrix.x4 (lanes 0-15 name
// the tile's 16 pixels at the step's first 16 bytes, lanes 16-31 the same pixels 16 bytes on:
// matrices a0..a3 of m16n8k16 or, reading 32-bit elements as pairs, of m16n8k8 tf32), and the
// filter's B fragments for two n-tiles with one more (lanes name channels; matrices: channels
// 0-7 at k bytes 0-15 and 16-31, then channels 8-15 likewise). f32: A rounded to tf32 in
// registers (cvt.rna), B at packing.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_few_channels_mma.h"
#include "kernels/convolution/convolution_tc_gemm.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::few_channels_mma {
namespace {

constexpr int kMostWarpTiles = 2;   // m-tiles a warp multiplies at once, at most
constexpr int kFewWarps = 4;        // below this many warps a block takes one m-tile a warp
constexpr int kMaxWarps = 8;        // a block
constexpr int kTilePixels = 256;    // a tile of dx aims at this many pixels (whole rows)
constexpr int kStepBytes = 32;      // one mma's k: 16 16-bit elements, 8 tf32
constexpr int kPadBytes = 16;       // the pitch's odd 16-byte unit
constexpr int kSharedFloor = 1024;  // shared memory the runtime keeps a block (occupancy)

// The device's SMs and shared memory, or an H100/H200's where no device answers.
using Limits = gpu::DeviceLimits;

struct Plan {
  int N, H, W, C, K, P, Q, R, S, pad_h, pad_w;
  int eb;                // element bytes (2, or 4 for f32)
  int CP, KP;            // channels rounded up to 8; the pitch, elements
  int ksteps;            // 32-byte k steps
  int BI, bands, units;  // rows a tile, tiles an image, tiles in all
  int WR, WC;            // the window
  int mt;  // m-tiles a warp multiplies at once: 2, or 1 where 2 would leave fewer than kFewWarps
  int warps, blocks;
  int vector;  // bytes a staging copy of dy: 16, 8, 4 (cp.async) or 2 (a load and a store)

  __host__ __device__ int pitch() const { return KP * eb; }
  __host__ __device__ size_t filter_bytes() const { return size_t(R) * S * CP * pitch(); }
  __host__ __device__ size_t window_bytes() const { return size_t(WR) * WC * pitch(); }
  size_t shared_bytes() const { return filter_bytes() + 2 * window_bytes(); }
};

// The plan for `eb`-byte elements, or one with units == 0 where not even a one-row tile fits.
Plan plan_of(const Conv2dGeometry& g, int eb, const Limits& l) {
  Plan a{};
  a.N = int(g.N), a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.K = int(g.K);
  a.P = int(g.P()), a.Q = int(g.Q()), a.R = int(g.R), a.S = int(g.S);
  a.pad_h = int(g.pad_h), a.pad_w = int(g.pad_w);
  a.eb = eb;
  a.CP = int(ceil_div(a.C, 8)) * 8;
  const int k_bytes = int(ceil_div(int64_t(a.K) * eb, kStepBytes)) * kStepBytes;
  a.KP = (k_bytes + kPadBytes) / eb;
  a.ksteps = k_bytes / kStepBytes;
  a.WC = a.W + a.S - 1;
  // Whole rows toward kTilePixels, fewer where the windows would not fit, and bands of fewer
  // rows where the images alone would leave SMs idle.
  a.BI = int(std::clamp<int64_t>(ceil_div(kTilePixels, a.W), 1, a.H));
  auto fit = [&] {
    a.WR = a.BI + a.R - 1;
    return a.shared_bytes() <= size_t(l.shared_per_block);
  };
  while (!fit() && a.BI > 1) --a.BI;
  if (!fit()) return a;  // units stays 0
  while (a.BI > 1 && int64_t(a.N) * ceil_div(a.H, a.BI) < l.sms) a.BI = int(ceil_div(a.BI, 2));
  fit();
  a.bands = int(ceil_div(a.H, a.BI));
  a.units = a.N * a.bands;
  const int mtiles = int(ceil_div(int64_t(a.BI) * a.W, 16));
  a.mt = ceil_div(mtiles, kMostWarpTiles) >= kFewWarps ? kMostWarpTiles : 1;
  a.warps = std::clamp(int(ceil_div(mtiles, a.mt)), 1, kMaxWarps);
  const int per_sm = std::max(1, l.shared_per_sm / int(a.shared_bytes() + kSharedFloor));
  a.blocks = int(std::min<int64_t>(a.units, int64_t(l.sms) * per_sm));
  return a;
}

// The element types: the mma of 32 bytes of k, and the store's rounding.
template <class TcElement>
struct Half {
  using T = uint16_t;
  static constexpr bool kTf32 = false;
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    TcElement::mma(d, a, b);
  }
  static __device__ __forceinline__ T narrow(float v) { return tc::round_to<TcElement>(v); }
  static __device__ __forceinline__ uint32_t pair(float lo, float hi) {
    return TcElement::pack(lo, hi);
  }
};
using Bf16 = Half<tc::Bf16>;
using F16 = Half<tc::F16>;
struct Tf32 {
  using T = float;
  static constexpr bool kTf32 = true;
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    detail::mma_tf32(d, a, b);
  }
};

// One staging copy of V bytes: cp.async (4, 8 or 16 bytes), or a load and a store (2).
template <int V>
__device__ __forceinline__ void copy(unsigned char* dst, const unsigned char* src) {
  if constexpr (V == 2) {
    *reinterpret_cast<uint16_t*>(dst) = __ldg(reinterpret_cast<const uint16_t*>(src));
  } else {
    const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
    if constexpr (V == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(V));
    }
  }
}
template <int V>
__device__ __forceinline__ void zero(unsigned char* dst) {
  if constexpr (V == 16) *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  if constexpr (V == 8) *reinterpret_cast<uint2*>(dst) = make_uint2(0, 0);
  if constexpr (V == 4) *reinterpret_cast<uint32_t*>(dst) = 0;
  if constexpr (V == 2) *reinterpret_cast<uint16_t*>(dst) = 0;
}

// Tile `unit`'s window of dy into `window`: warps take its rows, lanes the consecutive V-byte
// pieces of a row's pixels (coalesced: a row of dy in the image is contiguous); the bytes past
// K stay as zeroed at the start.
template <int V>
__device__ __forceinline__ void stage_with(const Plan& a, const unsigned char* dy, int unit,
                                           unsigned char* window) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int n = unit / a.bands, h0 = unit % a.bands * a.BI;
  const int per_pixel = a.K * a.eb / V, pitch = a.pitch();
  const int p0 = h0 + a.pad_h - (a.R - 1), q0 = a.pad_w - (a.S - 1);
  const int64_t row_bytes = int64_t(a.Q) * a.K * a.eb;
  for (int wr = warp; wr < a.WR; wr += warps) {
    const int p = p0 + wr;
    const bool row_in = p >= 0 && p < a.P;
    const unsigned char* src = dy + (int64_t(n) * a.P + (row_in ? p : 0)) * row_bytes;
    unsigned char* dst = window + wr * a.WC * pitch;
    for (int j = lane; j < a.WC * per_pixel; j += 32) {
      const int wc = j / per_pixel, v = j - wc * per_pixel, q = q0 + wc;
      if (row_in && q >= 0 && q < a.Q) {
        copy<V>(dst + wc * pitch + v * V, src + int64_t(q) * a.K * a.eb + v * V);
      } else {
        zero<V>(dst + wc * pitch + v * V);
      }
    }
  }
}
__device__ __forceinline__ void stage(const Plan& a, const unsigned char* dy, int unit,
                                      unsigned char* window) {
  switch (a.vector) {
    case 16:
      return stage_with<16>(a, dy, unit, window);
    case 8:
      return stage_with<8>(a, dy, unit, window);
    case 4:
      return stage_with<4>(a, dy, unit, window);
    default:
      return stage_with<2>(a, dy, unit, window);
  }
}

// Tile `unit` from the staged window and filter: every warp's m-tiles, then their stores.
template <class E, int MT, int NT>
__device__ __forceinline__ void multiply(const Plan& a, uint32_t filter, uint32_t window, int unit,
                                         typename E::T* __restrict__ dx) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n = unit / a.bands, h0 = unit % a.bands * a.BI;
  const int M = min(a.BI, a.H - h0) * a.W, mtiles = (M + 15) / 16;
  const uint32_t pitch = uint32_t(a.pitch()), tap_b = uint32_t(a.CP) * pitch;
  // B: lanes 0-7 channels 0-7 at k bytes 0-15, 8-15 the same at 16-31, 16-31 channels 8-15.
  const uint32_t b_lane = uint32_t(lane % 8 + 8 * (lane / 16)) * pitch + (lane / 8) % 2 * 16;
  typename E::T* out = dx + (int64_t(n) * a.H + h0) * a.W * a.C;
  for (int m0 = warp * MT; m0 < mtiles; m0 += a.warps * MT) {
    uint32_t row[MT];  // this lane's A row: pixel m0 * 16 + lane % 16 (the last where past M)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int m = min((m0 + i) * 16 + lane % 16, M - 1), h = m / a.W, w = m - h * a.W;
      row[i] = window + uint32_t((h + a.R - 1) * a.WC + w + a.S - 1) * pitch + lane / 16 * 16;
    }
    float acc[MT][NT][4] = {};
    uint32_t b_tap = filter + b_lane;
    for (int r = 0; r < a.R; ++r) {
      for (int s = 0; s < a.S; ++s, b_tap += tap_b) {
        const uint32_t shift = uint32_t(r * a.WC + s) * pitch;
        for (int ks = 0; ks < a.ksteps; ++ks) {
          const uint32_t k = uint32_t(ks) * kStepBytes;
          uint32_t fa[MT][4], fb[NT][2];
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            tc::ldmatrix_x4_at(fa[i], row[i] - shift + k);
            if constexpr (E::kTf32) {
#pragma unroll
              for (int q = 0; q < 4; ++q) fa[i][q] = detail::to_tf32(__uint_as_float(fa[i][q]));
            }
          }
          tc::load_b_fragments<NT>(fb, b_tap + k, pitch);
#pragma unroll
          for (int i = 0; i < MT; ++i) {
#pragma unroll
            for (int j = 0; j < NT; ++j) E::mma(acc[i][j], fa[i], fb[j]);
          }
        }
      }
    }
    // c: rows lane / 4 and + 8 of each m-tile, channels 2 (lane % 4) and + 1 of each n-tile.
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m = (m0 + i) * 16 + lane / 4 + 8 * half;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int c = j * 8 + lane % 4 * 2;
          if (c >= a.C) continue;
          typename E::T* o = out + int64_t(m) * a.C + c;
          const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
          const bool pair = c + 1 < a.C && reinterpret_cast<uintptr_t>(o) % (2 * a.eb) == 0;
          if constexpr (E::kTf32) {
            if (pair) {
              *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
            } else {
              o[0] = v0;
              if (c + 1 < a.C) o[1] = v1;
            }
          } else {
            if (pair) {
              *reinterpret_cast<uint32_t*>(o) = E::pair(v0, v1);
            } else {
              o[0] = E::narrow(v0);
              if (c + 1 < a.C) o[1] = E::narrow(v1);
            }
          }
        }
      }
    }
  }
}

// Persistent blocks: the filter staged once, then the block's tiles in turn, the next one's
// window copied while the current one is multiplied.
template <class E, int MT, int NT>
__global__ void __launch_bounds__(kMaxWarps * 32, 1)
    data_kernel(const Plan a, const typename E::T* __restrict__ dy,
                const typename E::T* __restrict__ packed, typename E::T* __restrict__ dx) {
  extern __shared__ __align__(16) unsigned char smem[];
  const size_t filter_bytes = a.filter_bytes(), window_bytes = a.window_bytes();
  unsigned char* windows = smem + filter_bytes;
  const int tid = threadIdx.x, threads = blockDim.x;
  for (size_t i = size_t(tid) * 16; i < 2 * window_bytes; i += size_t(threads) * 16) {
    *reinterpret_cast<uint4*>(windows + i) = make_uint4(0, 0, 0, 0);
  }
  __syncthreads();  // the zeros land before any copy into the same rows
  const auto* packed_bytes = reinterpret_cast<const unsigned char*>(packed);
  for (size_t i = size_t(tid) * 16; i < filter_bytes; i += size_t(threads) * 16) {
    copy<16>(smem + i, packed_bytes + i);
  }
  const auto* dy_bytes = reinterpret_cast<const unsigned char*>(dy);
  int unit = blockIdx.x;
  if (unit < a.units) stage(a, dy_bytes, unit, windows);
  detail::cp_async_commit();
  const uint32_t filter = uint32_t(__cvta_generic_to_shared(smem));
  for (int it = 0; unit < a.units; unit += gridDim.x, ++it) {
    const int next = unit + int(gridDim.x);
    if (next < a.units) stage(a, dy_bytes, next, windows + (it + 1) % 2 * window_bytes);
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();  // this tile's window (and the filter) in place for every warp
    const uint32_t window = uint32_t(__cvta_generic_to_shared(windows + it % 2 * window_bytes));
    multiply<E, MT, NT>(a, filter, window, unit, dx);
    __syncthreads();  // every warp done with the window before it is refilled
  }
}

// The filter as the kernel stages it: [R*S][CP][KP], zeros past C and K and in the pitch's
// padding; f32 rounded to tf32.
template <class E>
__global__ void pack_filter_kernel(const Plan a, const typename E::T* __restrict__ w,
                                   typename E::T* __restrict__ packed) {
  const int64_t total = int64_t(a.R) * a.S * a.CP * a.KP;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int k = int(i % a.KP), c = int(i / a.KP % a.CP), tap = int(i / (int64_t(a.KP) * a.CP));
    typename E::T v{};
    if (c < a.C && k < a.K) v = w[(int64_t(k) * a.R * a.S + tap) * a.C + c];
    if constexpr (E::kTf32) v = __uint_as_float(detail::to_tf32(v));
    packed[i] = v;
  }
}

constexpr const char* kWhat = "conv2d backward data (few channels, mma.sync)";

template <class E, int MT, int NT>
void launch(const Plan& a, const void* dy, const void* packed, void* dx, gpu::Stream stream) {
  const auto kernel = data_kernel<E, MT, NT>;
  const int bytes = int(a.shared_bytes());
  if (bytes > 48 << 10) detail::set_shared_memory_limit(kernel, bytes, kWhat);
  using T = typename E::T;
  kernel<<<unsigned(a.blocks), unsigned(a.warps * 32), size_t(bytes), stream>>>(
      a, static_cast<const T*>(dy), static_cast<const T*>(packed), static_cast<T*>(dx));
  gpu::check_launch(kWhat);
}

// The n-tiles (C rounded up to 8, by 8) as a template argument.
template <class E, int MT>
void launch_tiles(const Plan& a, const void* dy, const void* packed, void* dx, gpu::Stream stream) {
  switch (a.CP / 8) {
    case 1:
      return launch<E, MT, 1>(a, dy, packed, dx, stream);
    case 2:
      return launch<E, MT, 2>(a, dy, packed, dx, stream);
    case 3:
      return launch<E, MT, 3>(a, dy, packed, dx, stream);
    default:
      return launch<E, MT, 4>(a, dy, packed, dx, stream);
  }
}

template <class E>
void run(const Plan& a, const void* dy, const void* w, void* dx, void* workspace,
         gpu::Stream stream) {
  using T = typename E::T;
  const int64_t packed = int64_t(a.R) * a.S * a.CP * a.KP;
  pack_filter_kernel<E><<<blocks_for(packed), kThreads, 0, stream>>>(a, static_cast<const T*>(w),
                                                                     static_cast<T*>(workspace));
  gpu::check_launch(kWhat);
  if (a.mt == 2) return launch_tiles<E, 2>(a, dy, workspace, dx, stream);
  launch_tiles<E, 1>(a, dy, workspace, dx, stream);
}

int element_bytes(Element type) {
  return type == Element::f32 ? 4 : 2;
}

// The widest staging copy a pixel's K elements and dy's alignment allow.
int vector_for(const void* dy, int pixel_bytes) {
  const auto at = reinterpret_cast<uintptr_t>(dy);
  for (int v : {16, 8, 4}) {
    if (at % uintptr_t(v) == 0 && pixel_bytes % v == 0) return v;
  }
  return 2;
}

}  // namespace

bool fits(const Conv2dGeometry& g, Element type) {
  if (g.groups != 1 || g.C > 32 || g.stride_h != 1 || g.stride_w != 1 || g.dilation_h != 1 ||
      g.dilation_w != 1) {
    return false;
  }
  const Plan a = plan_of(g, element_bytes(type), gpu::device_limits());
  return a.units > 0 && int64_t(a.N) * a.bands < (int64_t(1) << 31);
}

size_t workspace_bytes(const Conv2dGeometry& g, Element type) {
  const Plan a = plan_of(g, element_bytes(type), Limits{});
  return a.filter_bytes();
}

void backward_data(const Conv2dGeometry& g, Element type, const void* dy, const void* w, void* dx,
                   void* workspace, gpu::Stream stream) {
  if (!fits(g, type)) throw Error(std::string(kWhat) + ": the geometry does not fit");
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    throw Error(std::string(kWhat) + ": needs a 16-byte aligned workspace (workspace_bytes)");
  }
  Plan a = plan_of(g, element_bytes(type), gpu::device_limits());
  a.vector = vector_for(dy, a.K * a.eb);
  switch (type) {
    case Element::f32:
      return run<Tf32>(a, dy, w, dx, workspace, stream);
    case Element::bf16:
      return run<Bf16>(a, dy, w, dx, workspace, stream);
    case Element::f16:
      return run<F16>(a, dy, w, dx, workspace, stream);
  }
}

}  // namespace crema::kernels::cuda::few_channels_mma
