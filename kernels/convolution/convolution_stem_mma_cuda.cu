// The few-input-channel forward on mma.sync (convolution_stem_mma.h).
//
// Shared memory of a block: the filter [K][KP] (KP = the reduction R * S * C2 rounded up to whole
// 16-wide k steps, plus 8 elements: a row is an odd number of 16-byte units, so ldmatrix's 8 rows
// meet 8 bank groups), then the staged rows of x [WR][WC][C2].
//
// A tile is BP output rows of one image, all Q columns: M = BP * Q pixels, pixel m = (p0 + m / Q,
// m % Q). It reads x rows p0 * sh - ph .. + WR - 1 (WR = (BP - 1) * sh + R) and columns -pw ..
// -pw + WC - 1 (WC = (Q - 1) * sw + S), staged as window row i, pixel j (zeros outside the image,
// channels C .. C2 - 1 zero). The A element of pixel (pl, q) at kk = r * L + j (L = S * C2, j =
// s * C2 + c) is then at byte (pl * sh + r) * row_bytes + (q * sw) * C2 * 2 + j * 2: the pixel's
// base plus an offset that depends on kk alone. A lane's A fragment of m16n8k16 is the pairs kk =
// 2t, 2t + 1 and 2t + 8, 2t + 9 (t = lane % 4) of rows g and g + 8 (g = lane / 4): four 32-bit
// loads at two offsets, which the lane walks k step by k step (r, j) as it goes -- L >= 8, so a
// step of 16 wraps at most twice. Past the reduction (r >= R) the loads give zeros.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/common/launch.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc_gemm.cuh"
#include "kernels/tiles/tile_common.cuh"

namespace crema::kernels::cuda::stem_mma {
namespace {

constexpr int kMT = 2;                    // m-tiles a warp multiplies at once (sharing B)
constexpr int kMaxWarps = 8;              // a block
constexpr int kTilePixels = 256;          // a tile aims at this many pixels (whole output rows)
constexpr int kMaxInner = 256;            // R * S * C2 at most
constexpr int kMaxK = 64;                 // output channels at most (8 n-tiles)
constexpr int kBlocksPerSm = 2;           // persistent blocks an SM
constexpr int kSharedBudget = 100 << 10;  // a block's shared memory: two fit an H100/H200 SM

int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  return count;
}

struct Plan {
  int N, H, W, C, K, P, Q, R, S, sh, sw, ph, pw;
  int C2, L, KK, ksteps;  // channels rounded up to even, S * C2, R * L, 16-wide k steps
  int KP;                 // the filter's row pitch, elements
  int BP, bands, units;   // output rows a tile, tiles an image, tiles in all
  int WR, WC, row_bytes;  // the staged rows of x
  int warps, blocks;

  __host__ __device__ size_t filter_bytes() const { return size_t(K) * KP * 2; }
  __host__ __device__ size_t window_bytes() const { return size_t(WR) * row_bytes; }
  size_t shared_bytes() const { return filter_bytes() + window_bytes(); }
};

// The plan, units == 0 where a one-row tile does not fit.
Plan plan_of(const Conv2dGeometry& g, int sms) {
  Plan a{};
  a.N = int(g.N), a.H = int(g.H), a.W = int(g.W), a.C = int(g.C), a.K = int(g.K);
  a.P = int(g.P()), a.Q = int(g.Q()), a.R = int(g.R), a.S = int(g.S);
  a.sh = int(g.stride_h), a.sw = int(g.stride_w), a.ph = int(g.pad_h), a.pw = int(g.pad_w);
  a.C2 = a.C + a.C % 2;
  a.L = a.S * a.C2;
  a.KK = a.R * a.L;
  a.ksteps = (a.KK + 15) / 16;
  a.KP = a.ksteps * 16 + 8;
  a.WC = (a.Q - 1) * a.sw + a.S;
  a.row_bytes = a.WC * a.C2 * 2;
  a.BP = std::clamp(kTilePixels / a.Q, 1, a.P);
  auto fit = [&] {
    a.WR = (a.BP - 1) * a.sh + a.R;
    return a.shared_bytes() <= size_t(kSharedBudget);
  };
  while (!fit() && a.BP > 1) --a.BP;
  if (!fit()) return a;
  while (a.BP > 1 && int64_t(a.N) * ceil_div(a.P, a.BP) < int64_t(kBlocksPerSm) * sms) {
    a.BP = int(ceil_div(a.BP, 2));
  }
  fit();
  a.bands = int(ceil_div(a.P, a.BP));
  a.units = a.N * a.bands;
  a.warps = std::clamp(int(ceil_div(ceil_div(int64_t(a.BP) * a.Q, 16), kMT)), 1, kMaxWarps);
  a.blocks = int(std::min<int64_t>(a.units, int64_t(kBlocksPerSm) * sms));
  return a;
}

__device__ __forceinline__ uint32_t load_shared(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return v;
}

// A lane's walk along the reduction: kk = r * L + j, advanced 16 at a time.
struct Inner {
  int r, j;
  __device__ __forceinline__ void advance(int L) {  // L >= 8: at most two wraps
    j += 16;
    if (j >= L) j -= L, ++r;
    if (j >= L) j -= L, ++r;
  }
};

// The rows of x tile `unit` reads, each pixel C2 = 2 * PAIRS wide (zeros outside the image and
// past C). Each thread loads kBatch pixels' values before storing any: one trip to memory a
// batch, not one a pixel.
constexpr int kBatch = 8;
template <int PAIRS>
__device__ __forceinline__ void stage_pairs(const Plan& a, const uint16_t* __restrict__ x, int unit,
                                            unsigned char* window) {
  const int n = unit / a.bands, h0 = unit % a.bands * a.BP * a.sh - a.ph;
  const int pixels = a.WR * a.WC, threads = blockDim.x;
  for (int first = threadIdx.x; first < pixels; first += kBatch * threads) {
    uint32_t v[kBatch][PAIRS];  // channel pairs, the lower channel in the low half
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * threads, row = i / a.WC, col = i - row * a.WC;
      const int h = h0 + row, w = col - a.pw;
      const bool in = i < pixels && h >= 0 && h < a.H && w >= 0 && w < a.W;
      const uint16_t* src = x + ((int64_t(n) * a.H + (in ? h : 0)) * a.W + (in ? w : 0)) * a.C;
#pragma unroll
      for (int c = 0; c < PAIRS; ++c) {
        const uint32_t lo = in && 2 * c < a.C ? __ldg(src + 2 * c) : 0u;
        const uint32_t hi = in && 2 * c + 1 < a.C ? __ldg(src + 2 * c + 1) : 0u;
        v[b][c] = lo | hi << 16;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * threads, row = i / a.WC, col = i - row * a.WC;
      if (i >= pixels) break;
      auto* dst = reinterpret_cast<uint32_t*>(window + size_t(row) * a.row_bytes) + col * PAIRS;
#pragma unroll
      for (int c = 0; c < PAIRS; ++c) dst[c] = v[b][c];
    }
  }
}
__device__ __forceinline__ void stage(const Plan& a, const uint16_t* __restrict__ x, int unit,
                                      unsigned char* window) {
  switch (a.C2) {
    case 2:
      return stage_pairs<1>(a, x, unit, window);
    case 4:
      return stage_pairs<2>(a, x, unit, window);
    case 6:
      return stage_pairs<3>(a, x, unit, window);
    default:
      return stage_pairs<4>(a, x, unit, window);
  }
}

template <class E, int NT>
__global__ void __launch_bounds__(kMaxWarps * 32, 1)
    forward_kernel(const Plan a, const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
                   const float* __restrict__ bias, const uint16_t* __restrict__ residual, bool relu,
                   uint16_t* __restrict__ y) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* window = smem + a.filter_bytes();
  auto* filter = reinterpret_cast<uint16_t*>(smem);
  // The filter as [k][kk], zeros past the reduction and in the padding channel.
  for (int i = threadIdx.x; i < a.K * a.KP; i += blockDim.x) {
    const int k = i / a.KP, kk = i - k * a.KP;
    uint16_t v = 0;
    if (kk < a.KK) {
      const int r = kk / a.L, j = kk - r * a.L, s = j / a.C2, c = j - s * a.C2;
      if (c < a.C) v = w[((int64_t(k) * a.R + r) * a.S + s) * a.C + c];
    }
    filter[i] = v;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint32_t window_at = uint32_t(__cvta_generic_to_shared(window));
  const uint32_t pitch = uint32_t(a.KP) * 2;
  // B: lanes 0-7 channels 0-7 at kk bytes 0-15, 8-15 the same at 16-31, 16-31 channels 8-15.
  const uint32_t b_lane = uint32_t(__cvta_generic_to_shared(smem)) +
                          uint32_t(lane % 8 + 8 * (lane / 16)) * pitch + (lane / 8) % 2 * 16;
  const int pixel_bytes = a.sw * a.C2 * 2;
  for (int unit = blockIdx.x; unit < a.units; unit += gridDim.x) {
    __syncthreads();  // the last tile's rows read by every warp (the first time: the filter)
    stage(a, x, unit, window);
    __syncthreads();
    const int n = unit / a.bands, p0 = unit % a.bands * a.BP;
    const int M = min(a.BP, a.P - p0) * a.Q, mtiles = (M + 15) / 16;
    uint16_t* out = y + (int64_t(n) * a.P + p0) * a.Q * a.K;
    const uint16_t* res = residual ? residual + (int64_t(n) * a.P + p0) * a.Q * a.K : nullptr;
    for (int m0 = warp * kMT; m0 < mtiles; m0 += a.warps * kMT) {
      uint32_t base[kMT][2];  // rows g and g + 8 of each m-tile (the last pixel where past M)
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int m = min((m0 + i) * 16 + g + 8 * hh, M - 1), pl = m / a.Q, q = m - pl * a.Q;
          base[i][hh] = window_at + uint32_t(pl * a.sh) * a.row_bytes + uint32_t(q * pixel_bytes);
        }
      }
      float acc[kMT][NT][4] = {};
      Inner lo{0, 2 * t}, hi{0, 2 * t + 8};
      while (hi.j >= a.L) hi.j -= a.L, ++hi.r;
      for (int ks = 0; ks < a.ksteps; ++ks) {
        const bool lo_in = lo.r < a.R, hi_in = hi.r < a.R;
        const uint32_t lo_at = uint32_t(lo.r * a.row_bytes + lo.j * 2);
        const uint32_t hi_at = uint32_t(hi.r * a.row_bytes + hi.j * 2);
        uint32_t fa[kMT][4], fb[NT][2];
#pragma unroll
        for (int i = 0; i < kMT; ++i) {
          fa[i][0] = lo_in ? load_shared(base[i][0] + lo_at) : 0u;
          fa[i][1] = lo_in ? load_shared(base[i][1] + lo_at) : 0u;
          fa[i][2] = hi_in ? load_shared(base[i][0] + hi_at) : 0u;
          fa[i][3] = hi_in ? load_shared(base[i][1] + hi_at) : 0u;
        }
        const uint32_t k = uint32_t(ks) * 32;
        tc::load_b_fragments<NT>(fb, b_lane + k, pitch);
#pragma unroll
        for (int i = 0; i < kMT; ++i) {
#pragma unroll
          for (int j = 0; j < NT; ++j) E::mma(acc[i][j], fa[i], fb[j]);
        }
        lo.advance(a.L), hi.advance(a.L);
      }
      // c: rows g and g + 8, channels 2t and 2t + 1 of each n-tile; the band's outputs are
      // contiguous in y, K a pixel.
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int m = (m0 + i) * 16 + g + 8 * hh;
          if (m >= M) continue;
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int k = j * 8 + 2 * t;
            float v0 = acc[i][j][2 * hh], v1 = acc[i][j][2 * hh + 1];
            if (bias != nullptr) v0 += bias[k], v1 += bias[k + 1];
            const int64_t at = int64_t(m) * a.K + k;
            if (res != nullptr) {
              const uint32_t r2 = *reinterpret_cast<const uint32_t*>(res + at);
              v0 += E::widen(uint16_t(r2 & 0xffffu)), v1 += E::widen(uint16_t(r2 >> 16));
            }
            if (relu) v0 = fmaxf(v0, 0.0f), v1 = fmaxf(v1, 0.0f);
            *reinterpret_cast<uint32_t*>(out + at) = E::pack(v0, v1);
          }
        }
      }
    }
  }
}

constexpr const char* kWhat = "conv2d forward (few input channels, mma.sync)";

template <class E, int NT>
void launch(const Plan& a, const void* x, const void* w, void* y, const TcEpilogue& ep,
            gpu::Stream stream) {
  const auto kernel = forward_kernel<E, NT>;
  const int bytes = int(a.shared_bytes());
  if (bytes > 48 << 10) detail::set_shared_memory_limit(kernel, bytes, kWhat);
  kernel<<<unsigned(a.blocks), unsigned(a.warps * 32), size_t(bytes), stream>>>(
      a, static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(w), ep.bias,
      static_cast<const uint16_t*>(ep.residual), ep.relu, static_cast<uint16_t*>(y));
  gpu::check_launch(kWhat);
}

template <class E>
void run(const Plan& a, const void* x, const void* w, void* y, const TcEpilogue& ep,
         gpu::Stream stream) {
  switch (a.K / 8) {
    case 1:
      return launch<E, 1>(a, x, w, y, ep, stream);
    case 2:
      return launch<E, 2>(a, x, w, y, ep, stream);
    case 3:
      return launch<E, 3>(a, x, w, y, ep, stream);
    case 4:
      return launch<E, 4>(a, x, w, y, ep, stream);
    case 5:
      return launch<E, 5>(a, x, w, y, ep, stream);
    case 6:
      return launch<E, 6>(a, x, w, y, ep, stream);
    case 7:
      return launch<E, 7>(a, x, w, y, ep, stream);
    default:
      return launch<E, 8>(a, x, w, y, ep, stream);
  }
}

}  // namespace

bool fits(const Conv2dGeometry& g) {
  if (g.groups != 1 || g.dilation_h != 1 || g.dilation_w != 1 || g.C > 8 || g.K % 8 != 0 ||
      g.K > kMaxK) {
    return false;
  }
  const int C2 = int(g.C + g.C % 2);
  if (g.R * g.S * C2 > kMaxInner || g.S * C2 < 8) return false;
  const Plan a = plan_of(g, multiprocessors());
  return a.units > 0 && int64_t(a.N) * a.bands < (int64_t(1) << 31);
}

void forward(const Conv2dGeometry& g, TcType type, const void* x, const void* w, void* y,
             const TcEpilogue& epilogue, gpu::Stream stream) {
  if (!fits(g)) throw Error(std::string(kWhat) + ": the geometry does not fit");
  if (epilogue.sum != nullptr || reinterpret_cast<uintptr_t>(y) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(epilogue.residual) % 4 != 0) {
    throw Error(std::string(kWhat) +
                ": takes 4-byte aligned y and residual, and no channel statistics");
  }
  const Plan a = plan_of(g, multiprocessors());
  if (type == TcType::bf16) {
    run<tc::Bf16>(a, x, w, y, epilogue, stream);
  } else {
    run<tc::F16>(a, x, w, y, epilogue, stream);
  }
}

}  // namespace crema::kernels::cuda::stem_mma
