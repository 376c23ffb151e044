// The filter gradient on 16-bit NHWC tensors with tensor cores (convolution_tc.h), fp32 out. Per
// group g, one implicit GEMM (convolution_tc_gemm.cuh) whose inner index is the output position:
//
//   dw_g^T[R*S*Cg, Kg] += patches_g^T[R*S*Cg, N*P*Q] * dy_g[N*P*Q, Kg]
//
// N*P*Q is the outer index of both NHWC operands, so the tiles are k-outer ([kBK][rows]): 16-byte
// copies of 8 channels of one output position where Cg and Kg are multiples of 8 (and the tensors
// 16-byte aligned), else element by element. N*P*Q is cut into fixed slices (enough blocks to fill
// the device, at least kMinSlabsPerSlice slabs each) whose fp32 partial sums
// [slice, g, R*S*Cg, Kg] (workspace) a second kernel adds to dw in slice order: deterministic, no
// float atomics.
//
// A stem (C < 8, groups 1: the 3-channel 7x7) runs the stem's own kernel where it fits
// (convolution_stem_mma.h: K a multiple of 16 up to 64, dy 16-byte aligned; `best` and
// TcKernels::stem_mma). Otherwise it would load element by element; instead x is copied
// into the workspace as [N, H, W, 8] with zeros in channels C..7 and the 16-byte path runs on that
// geometry (C = 8: rows R*S*8); the slice sums then read only the real channels' rows
// (pads_channels, below).
//
// On a device of compute capability 9.0, a convolution that fits (wgmma_backward_filter_fits:
// groups 1, strides up to 8, C and K multiples of 8) and pays (wgmma_backward_filter_pays: the
// 1x1s, filters of taps with C = 64 (two taps a tile) or at least 128 channels each side) runs on
// the wgmma + TMA kernel instead (convolution_tc_wgmma_filter_sm90a.cu: its own cut, its slices
// summed within clusters of blocks, dw written by it).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/convolution/convolution_depthwise_nhwc.h"
#include "kernels/convolution/convolution_grouped_nhwc.h"
#include "kernels/convolution/convolution_stem_mma.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/convolution/convolution_tc_loaders.cuh"
#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/gemm/gemm_cuda_internal.h"

namespace crema::kernels::cuda {
namespace tc {
namespace {

// About two waves of 128 x 128 blocks on an H100 or H200 (132 SMs).
constexpr int kTargetBlocks = 264;
constexpr int kMinSlabsPerSlice = 8;

// partial[z, m, n] = sum over the slice's npq of patches_g[npq, m] * dy[npq, g*Kg + n], with
// z = slice * G + g.
template <class T, int VEC>
struct FilterProblem {
  static constexpr bool kKOuter = true, kStats = false;
  Params p;
  const uint16_t *x, *dy;
  float* partial;
  int M, slice_length;
  __device__ void k_range(int z, int& begin, int& end) const {
    begin = z / p.G * slice_length;
    end = min(p.N * p.P * p.Q, begin + slice_length);
  }
  __device__ TapLoader<T::BM, VEC> make_a(int m0, int z, int k_end) const {
    return TapLoader<T::BM, VEC>(p, x, m0, z % p.G, k_end);
  }
  __device__ OutputChannelLoader<T::BN, VEC> make_b(int n0, int z, int k_end) const {
    return OutputChannelLoader<T::BN, VEC>(p, dy, n0, z % p.G, k_end);
  }
  __device__ float2 store(int z, int m, int n, float v0, float v1) const {
    float* row = partial + (int64_t(z) * M + m) * p.Kg;
    if (n < p.Kg) row[n] = v0;
    if (n + 1 < p.Kg) row[n + 1] = v1;
    return make_float2(v0, v1);
  }
  __device__ void store_stats(int, int, int, float, float) const {}
};

// dw[g*Kg + k, rs*Cg + c] += sum over slices, in order, of partial[slice, g, rs*Cp + c, k]: the
// partials' rows hold Cp >= Cg channels a tap (Cp = 8 on a padded copy of x, else Cg). A
// transposition: block (x, y, z) takes channels 32x.., output channels 32y.. of tap z % RS of group
// z / RS (z, z + gridDim.z, ...) through a 32 x 33 shared tile, reading the partials along k and
// writing dw along c, both coalesced (read along c, each 4-byte load of a warp touched its own
// 32-byte sector: 16,2048,7,7 -> 512's slice sums took most of its filter gradient).
__global__ void __launch_bounds__(256)
    sum_slices_kernel(const float* __restrict__ partial, int slices, int G, int Kg, int RS, int Cg,
                      int Cp, float* __restrict__ dw) {
  __shared__ float tile[32][33];
  const int c0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
  const int64_t slice_floats = int64_t(G) * RS * Cp * Kg;
  for (int z = blockIdx.z; z < G * RS; z += gridDim.z) {  // tap z % RS of group z / RS
    const int rs = z % RS, g = z / RS;
    const float* tap = partial + (int64_t(g) * RS + rs) * Cp * Kg;
    for (int i = threadIdx.y; i < 32; i += 8) {  // row c0 + i, column k0 + threadIdx.x
      const int c = c0 + i, k = k0 + int(threadIdx.x);
      float sum = 0.0f;
      if (c < Cg && k < Kg) {
        const float* at = tap + int64_t(c) * Kg + k;
        for (int s = 0; s < slices; ++s) sum += at[s * slice_floats];
      }
      tile[i][threadIdx.x] = sum;
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {  // output channel k0 + i, channel c0 + x
      const int k = k0 + i, c = c0 + int(threadIdx.x);
      if (k < Kg && c < Cg) dw[((int64_t(g) * Kg + k) * RS + rs) * Cg + c] += tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

// The same sums, element i = ((g * RS + rs) * Cg + c) * Kg + k a thread (fewer than 128 tiles:
// at most 128 * 1024 elements).
__global__ void __launch_bounds__(256)
    sum_slices_along_k_kernel(const float* __restrict__ partial, int slices, int G, int Kg, int RS,
                              int Cg, int Cp, float* __restrict__ dw) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(G) * RS * Cg * Kg) return;
  const int k = int(i % Kg), c = int(i / Kg % Cg);
  const int64_t tap = i / (int64_t(Kg) * Cg), rs = tap % RS, g = tap / RS;
  const int64_t slice_floats = int64_t(G) * RS * Cp * Kg;
  const float* at = partial + (tap * Cp + c) * Kg + k;
  float sum = 0.0f;
  for (int s = 0; s < slices; ++s) sum += at[s * slice_floats];
  dw[((g * Kg + k) * RS + rs) * Cg + c] += sum;
}

// out[pixel, 0..7] = x[pixel, 0..C-1] then zeros (C < 8): one 16-byte store a pixel.
__global__ void pad_channels_kernel(const uint16_t* __restrict__ x, int64_t pixels, int C,
                                    uint16_t* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pixels;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint16_t v[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) v[c] = c < C ? x[i * C + c] : uint16_t(0);
    store_chunk(out + 8 * i, v);
  }
}

// The cut of N*P*Q: `length` inner indices (a multiple of kBK) per slice.
struct Slices {
  int count, length;
};
Slices filter_slices(const Conv2dGeometry& g) {
  const int64_t NPQ = g.N * g.P() * g.Q(), M = g.R * g.S * (g.C / g.groups), N = g.K / g.groups;
  const int64_t bn = N > Narrow::BN ? Wide::BN : Narrow::BN;
  const int64_t blocks = (M + Wide::BM - 1) / Wide::BM * ((N + bn - 1) / bn) * g.groups;
  const int64_t most =
      std::max<int64_t>(1, std::min((NPQ + kMinSlabsPerSlice * kBK - 1) / (kMinSlabsPerSlice * kBK),
                                    int64_t(65535) / g.groups));
  const int64_t wanted = std::clamp<int64_t>((kTargetBlocks + blocks - 1) / blocks, 1, most);
  const int64_t length = ((NPQ + wanted - 1) / wanted + kBK - 1) / kBK * kBK;
  return {int((NPQ + length - 1) / length), int(length)};
}

template <class E, int VEC>
void filter_with(const Params& p, const Slices& slices, const uint16_t* x, const uint16_t* dy,
                 float* partial, gpu::Stream stream) {
  auto run = [&](auto tile) {
    using T = decltype(tile);
    const FilterProblem<T, VEC> prob{p, x, dy, partial, p.RS * p.Cg, slices.length};
    launch<T, E>(prob, p.Kg, slices.count * p.G, stream, "conv2d_tc_backward_filter");
  };
  p.Kg > Narrow::BN ? run(Wide{}) : run(Narrow{});
}

// Where the filter gradient runs on x padded to 8 channels (the 16-byte path on R*S*8 rows)
// rather than element-wise loads of C: the stem (C = 3) and any C < 8 with groups 1 and K a
// multiple of 8 (dy's 16-byte copies), while x padded stays under 2^31 elements. The padded GEMM
// has 8 / C the rows (the 7x7 stem: 392 rows, 4 row tiles of 128, against 147 in 2), but every
// copy is asynchronous and 16 bytes wide (cuDNN pads too). H200, 2026-11-27: the stem at N 128
// 0.500 ms against 0.956 element by element and cuDNN's 0.626 (MEASUREMENTS.md, session 11).
bool pads_channels(const Conv2dGeometry& g) {
  return g.groups == 1 && g.C < 8 && g.K % 8 == 0 && g.N * g.H * g.W * 8 < INT32_MAX;
}

Conv2dGeometry with_8_channels(const Conv2dGeometry& g) {
  Conv2dGeometry padded = g;
  padded.C = 8;
  return padded;
}

// The padded path's workspace: the partials of the 8-channel geometry, then (256-byte aligned)
// x padded, [N, H, W, 8] 16-bit.
size_t padded_partial_bytes(const Conv2dGeometry& padded, const Slices& cut) {
  const size_t bytes = size_t(cut.count) * size_t(padded.K * padded.R * padded.S * 8) * 4;
  return (bytes + 255) / 256 * 256;
}
size_t padded_workspace(const Conv2dGeometry& g) {
  const Conv2dGeometry padded = with_8_channels(g);
  return padded_partial_bytes(padded, filter_slices(padded)) + size_t(g.N * g.H * g.W) * 8 * 2;
}

template <class E>
void filter_typed(const Params& p, const Slices& slices, const uint16_t* x, const uint16_t* dy,
                  float* partial, gpu::Stream stream) {
  if (p.Cg % 8 == 0 && p.Kg % 8 == 0 && implicit_gemm::aligned16(x) &&
      implicit_gemm::aligned16(dy)) {
    filter_with<E, 8>(p, slices, x, dy, partial, stream);
  } else {
    filter_with<E, 1>(p, slices, x, dy, partial, stream);
  }
}

}  // namespace
}  // namespace tc

namespace tc {

// Few 32 x 32 tiles (a small filter cut into many slices: ResNet-50's 64 -> 256 1x1 at batch 128,
// 16 tiles of 132 slices): one thread an element, k fastest (the partials read coalesced, dw
// written at a stride), so that every SM has threads; the tiles otherwise (H200, 2026-11-27,
// session 17, call 3: the tiles alone took that filter gradient from 90 to 128 us, and 16 x
// 256 x 14 x 14 -> 256 3x3's from 57 to 31 us).
void sum_filter_slices(const float* partial, int slices, int G, int Kg, int RS, int Cg, int Cp,
                       float* dw, gpu::Stream stream) {
  const int64_t tiles = int64_t((Cg + 31) / 32) * ((Kg + 31) / 32) * G * RS;
  if (tiles >= 128) {
    const dim3 grid(unsigned((Cg + 31) / 32), unsigned((Kg + 31) / 32),
                    unsigned(std::min(G * RS, 65535)));
    sum_slices_kernel<<<grid, dim3(32, 8), 0, stream>>>(partial, slices, G, Kg, RS, Cg, Cp, dw);
  } else {
    const int64_t total = int64_t(G) * RS * Cg * Kg;
    sum_slices_along_k_kernel<<<unsigned((total + 255) / 256), 256, 0, stream>>>(
        partial, slices, G, Kg, RS, Cg, Cp, dw);
  }
  gpu::check_launch("convolution filter gradient (slice sums)");
}

// Where wgmma's filter gradient is taken by `best` (H200, 2026-11-26, `crema bench conv-tc`, both
// families): every 1x1 without padding; with taps, at least 128 channels each side: ResNet-50's
// 3x3 128@28 0.125 ms against mma.sync's 0.191, 256@14 0.142 / 0.191, 512@7 0.141 / 0.189, while
// 64@56 loses (0.267 / 0.251: a 64 x 64 product half fills the tile and each tap re-reads both
// tensors). The strided ones (the 1x1s and 3x3s of ResNet's downsampling) follow the same rule:
// the same GEMMs, x read at every stride-th position (mma.sync: 0.13 to 0.19 ms, not yet timed
// on wgmma).
//
// With C = 64 and taps, the wgmma kernel now puts two taps in a tile (warpgroup 0 tap t,
// warpgroup 1 tap t+1, dy loaded once for both: wgmma_backward_filter_pairs_taps), so 64@56 no
// longer half fills it; taken for every K (H200, 2026-11-27: 64 -> 64 at 56, N 128, 0.118 ms
// against mma.sync's 0.253; 64 -> 128 at stride 2 0.086 against 0.107).
//
// Beyond those: wgmma wins wherever K >= 128 and C >= 32 (H200, 2026-11-27, session 17's bf16
// suite, both families in one run, wgmma's time over mma.sync's: 32->128 5x5 0.74, 48->128 5x5
// 0.79, 96->128 3x3 0.64, 96->208 0.74) and loses at K <= 96 with C <= 48 (16->32 1.68, 32->96
// 1.17, 48->64 1.71).
bool wgmma_backward_filter_pays(const Conv2dGeometry& g) {
  if (g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0) return true;
  if (wgmma_backward_filter_pairs_taps(g)) return true;
  return g.C >= 32 && g.K >= 128;
}
}  // namespace tc

size_t conv2d_tc_backward_filter_workspace(const Conv2dGeometry& g) {
  if (g.depthwise()) return depthwise_nhwc::backward_filter_workspace(g);
  const int slices = tc::filter_slices(g).count;
  size_t bytes = size_t(slices) * size_t(g.K * g.R * g.S * (g.C / g.groups)) * sizeof(float);
  if (tc::wgmma_backward_filter_fits(g)) {
    bytes = std::max(bytes, tc::wgmma_backward_filter_workspace(g));
  }
  bytes = std::max(bytes, grouped_nhwc::backward_filter_workspace(g));
  bytes = std::max(bytes, stem_mma::backward_filter_workspace(g));
  // Misaligned dy takes the element path on g itself: room for both.
  return tc::pads_channels(g) ? std::max(bytes, tc::padded_workspace(g)) : bytes;
}

bool conv2d_tc_backward_filter_uses_wgmma(const Conv2dGeometry& g, TcKernels kernels) {
  if (kernels == TcKernels::best && !tc::wgmma_backward_filter_pays(g)) return false;
  return wgmma_allowed(kernels) && tc::wgmma_backward_filter_fits(g) && detail::device_is_sm90();
}

void conv2d_tc_backward_filter(const Conv2dGeometry& g, TcType type, const void* x, const void* dy,
                               float* dw, void* workspace, gpu::Stream stream, TcKernels kernels) {
  using namespace tc;
  if (g.depthwise()) {
    return depthwise_nhwc::backward_filter(g, depthwise_nhwc::element_of(type), x, dy, dw,
                                           workspace, stream);
  }
  if (conv2d_tc_backward_filter_uses_grouped(g, kernels) &&
      grouped_nhwc::aligned({x, dy, workspace})) {
    return grouped_nhwc::backward_filter(g, type, x, dy, dw, workspace, stream);
  }
  if (conv2d_tc_backward_filter_uses_stem(g, kernels) && implicit_gemm::aligned16(dy) &&
      reinterpret_cast<uintptr_t>(workspace) % 4 == 0) {
    return stem_mma::backward_filter(g, type, x, dy, dw, workspace, stream);
  }
  const Params p = params_of(g);
  const auto* xs = static_cast<const uint16_t*>(x);
  const auto* dys = static_cast<const uint16_t*>(dy);
  auto* partial = static_cast<float*>(workspace);
  int slices = 0, Cp = p.Cg;  // Cp: channels a tap in the partials' rows
  if (implicit_gemm::aligned16(x) && implicit_gemm::aligned16(dy) &&
      conv2d_tc_backward_filter_uses_wgmma(g, kernels)) {
    return wgmma_backward_filter(g, type, x, dy, dw, workspace, stream);  // its own sums
  }
  if (pads_channels(g) && implicit_gemm::aligned16(dy)) {
    const Conv2dGeometry padded = with_8_channels(g);
    const Params p8 = params_of(padded);
    const Slices cut = filter_slices(padded);
    auto* x8 = reinterpret_cast<uint16_t*>(static_cast<char*>(workspace) +
                                           padded_partial_bytes(padded, cut));
    const int64_t pixels = g.N * g.H * g.W;
    const unsigned pad_blocks = unsigned(std::clamp<int64_t>((pixels + 255) / 256, 1, 65536));
    pad_channels_kernel<<<pad_blocks, 256, 0, stream>>>(xs, pixels, p.C, x8);
    gpu::check_launch("conv2d_tc_backward_filter (x padded to 8 channels)");
    // x8 is 16-byte aligned where the workspace is (else filter_typed takes the element path).
    if (type == TcType::bf16) {
      filter_typed<Bf16>(p8, cut, x8, dys, partial, stream);
    } else {
      filter_typed<F16>(p8, cut, x8, dys, partial, stream);
    }
    slices = cut.count, Cp = 8;
  } else {
    const Slices cut = filter_slices(g);
    if (type == TcType::bf16) {
      filter_typed<Bf16>(p, cut, xs, dys, partial, stream);
    } else {
      filter_typed<F16>(p, cut, xs, dys, partial, stream);
    }
    slices = cut.count;
  }
  tc::sum_filter_slices(partial, slices, p.G, p.Kg, p.RS, p.Cg, Cp, dw, stream);
}

}  // namespace crema::kernels::cuda
