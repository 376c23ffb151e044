// The output stages of the wgmma forward and backward data (convolution_tc_wgmma_conv.cuh's
// ConvProblem hands each 8 channels of one GEMM row, fp32, to one of these after its staged
// epilogue): the forward's bias, residual, ReLU, one rounding and channel statistics, and
// backward data's placement in dx. E: Bf16 or F16 (8 channels = 16 bytes, the channel counts
// multiples of 8) or float (f32 tensors in tf32 math: 8 channels = two 16-byte halves, the
// channel counts multiples of 4, so the second half of a row's last 8 may lie past its end; no
// rounding, no channel statistics). sm_90a files only, as convolution_tc_wgmma.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/convolution/convolution_tc_gemm.cuh"

namespace crema::kernels::cuda::tc::wg {

// What a tensor of E holds in memory: 16-bit patterns, or floats.
template <class E>
using Stored = std::conditional_t<std::is_same_v<E, float>, float, uint16_t>;

// Eight 16-bit values (16 bytes) as four pairs, and back.
template <class E>
__device__ __forceinline__ uint4 pack8(const float (&v)[8]) {
  return make_uint4(E::pack(v[0], v[1]), E::pack(v[2], v[3]), E::pack(v[4], v[5]),
                    E::pack(v[6], v[7]));
}
template <class E>
__device__ __forceinline__ void widen8(uint4 bits, float (&v)[8]) {
  const uint32_t pairs[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = E::widen(uint16_t(pairs[i] & 0xffffu));
    v[2 * i + 1] = E::widen(uint16_t(pairs[i] >> 16));
  }
}

// Forward: y[m, k] = act(acc + bias[k] + residual[m, k]) rounded once, 8 channels (16 bytes) at a
// time (residual may be y: each 16 bytes are read, then written, by the thread that owns them).
// f32: the same in two halves of 4 channels, not rounded, the second only where k + 4 < K.
template <class E, bool STATS>
struct ForwardOut {
  static constexpr bool kData = false, kStats = STATS;
  static_assert(!(STATS && std::is_same_v<E, float>), "no channel statistics on f32 tensors");
  int K;
  const float* bias;
  const Stored<E>* residual;
  bool relu;
  Stored<E>* y;
  float* stats;  // [rows][2][K]

  using Row = int64_t;  // the pixel's first element
  __device__ Row row(int m) const { return int64_t(m) * K; }
  // Channels k .. k+7 of v, which becomes the values as stored.
  __device__ void store(Row at, int k, float (&v)[8]) const {
    if constexpr (std::is_same_v<E, float>) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int first = k + 4 * h;
        if (first >= K) break;
        float* u = v + 4 * h;
        if (bias != nullptr) {
#pragma unroll
          for (int i = 0; i < 4; ++i) u[i] += bias[first + i];
        }
        if (residual != nullptr) {
          const float4 r = *reinterpret_cast<const float4*>(residual + at + first);
          u[0] += r.x, u[1] += r.y, u[2] += r.z, u[3] += r.w;
        }
        if (relu) {
#pragma unroll
          for (int i = 0; i < 4; ++i) u[i] = fmaxf(u[i], 0.0f);
        }
        *reinterpret_cast<float4*>(y + at + first) = make_float4(u[0], u[1], u[2], u[3]);
      }
    } else {
      if (bias != nullptr) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += bias[k + i];
      }
      if (residual != nullptr) {
        float r[8];
        widen8<E>(*reinterpret_cast<const uint4*>(residual + at + k), r);
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] += r[i];
      }
      if (relu) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = fmaxf(v[i], 0.0f);
      }
      const uint4 packed = pack8<E>(v);
      *reinterpret_cast<uint4*>(y + at + k) = packed;
      widen8<E>(packed, v);
    }
  }
  __device__ void store_stats(int row, int k, const float (&sum)[8],
                              const float (&squares)[8]) const {
    float* first = stats + int64_t(row) * 2 * K + k;
#pragma unroll
    for (int i = 0; i < 8; ++i) first[i] = sum[i], first[K + i] = squares[i];
  }
};

// Backward data: row (n, i, j) of the GEMM's P x Q is dx pixel (n, h0 + stride_h i, w0 +
// stride_w j) = acc rounded once, and the other pixels of its block_h x block_w block (inside the
// image) = 0: a strided 1x1's rows are dy's pixels, each filling its stride_h x stride_w block; a
// filter with taps runs one GEMM per output phase (h0, w0), blocks of one pixel. f32: not
// rounded, in two 16-byte halves, the second only where c + 4 < C.
template <class E>
struct DataOut {
  static constexpr bool kData = true, kStats = false;
  int C, H, W, P, Q, stride_h, stride_w, h0, w0, block_h, block_w;
  Stored<E>* dx;

  struct Row {
    int64_t at;      // the strided pixel's first element
    int rows, cols;  // the block's extent inside the image
  };
  __device__ Row row(int m) const {
    // At stride 1 the GEMM's rows are dx's pixels (P = H, Q = W: one phase, or a 1x1).
    if (stride_h == 1 && stride_w == 1 && P == H && Q == W) return {int64_t(m) * C, 1, 1};
    const int n = m / (P * Q), pq = m % (P * Q);
    const int h = h0 + pq / Q * stride_h, w = w0 + pq % Q * stride_w;
    return {(int64_t(n) * H * W + int64_t(h) * W + w) * C, min(block_h, H - h),
            min(block_w, W - w)};
  }
  // Channels c .. c+7.
  __device__ void store(const Row& r, int c, float (&v)[8]) const {
    if constexpr (std::is_same_v<E, float>) {
      const float4 lo = make_float4(v[0], v[1], v[2], v[3]),
                   hi = make_float4(v[4], v[5], v[6], v[7]),
                   zeros = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const bool both = c + 4 < C;
      for (int a = 0; a < r.rows; ++a) {
        for (int b = 0; b < r.cols; ++b) {
          float4* at = reinterpret_cast<float4*>(dx + r.at + (int64_t(a) * W + b) * C + c);
          const bool value = a == 0 && b == 0;
          at[0] = value ? lo : zeros;
          if (both) at[1] = value ? hi : zeros;
        }
      }
    } else {
      const uint4 packed = pack8<E>(v), zeros = make_uint4(0u, 0u, 0u, 0u);
      for (int a = 0; a < r.rows; ++a) {
        for (int b = 0; b < r.cols; ++b) {
          *reinterpret_cast<uint4*>(dx + r.at + (int64_t(a) * W + b) * C + c) =
              a == 0 && b == 0 ? packed : zeros;
        }
      }
    }
  }
  __device__ void store_stats(int, int, const float (&)[8], const float (&)[8]) const {}
};

}  // namespace crema::kernels::cuda::tc::wg
