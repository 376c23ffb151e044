// What the implicit-GEMM convolution kernels share (convolution_implicit_gemm_kernels.cuh: forward
// and backward data of v2 and v8; convolution_implicit_gemm_filter_cuda.cu: backward filter), and
// the other GPU versions borrow: the geometry in 32-bit ints with fast divisors, launch helpers.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution_cuda_internal.h"
#include "kernels/tiles/block_tile.cuh"

namespace crema::kernels::cuda::implicit_gemm {

// n / d and n % d for a divisor known at launch, as a multiply-high and a shift (Granlund and
// Montgomery's method, as in CUTLASS's FastDivmod): three instructions instead of the ~20 of an
// integer division. Exact for 0 <= n < 2^31.
struct FastDivmod {
  int divisor = 1;
  unsigned multiplier = 0, shift = 0;

  FastDivmod() = default;
  explicit FastDivmod(int d) : divisor(d) {
    if (d == 1) return;
    int log2_ceil = 0;
    while ((int64_t(1) << log2_ceil) < d) ++log2_ceil;
    const int p = 31 + log2_ceil;  // multiplier = ceil(2^p / d) < 2^32
    multiplier = unsigned(((uint64_t(1) << p) + uint64_t(d) - 1) / uint64_t(d));
    shift = unsigned(p - 32);
  }
  __device__ __forceinline__ int div(int n) const {
    return divisor == 1 ? n : int(__umulhi(unsigned(n), multiplier) >> shift);
  }
  __device__ __forceinline__ void divmod(int n, int& quotient, int& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor;
  }
};

// The geometry in 32-bit ints, and the divisors of its index arithmetic.
struct ConvParams {
  int N, C, H, W, K, R, S, P, Q;
  int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
  int Cg, Kg, HW, PQ, RS, CRS;
  FastDivmod by_PQ, by_Q, by_HW, by_W, by_RS, by_S, by_stride_h, by_stride_w;
};

inline ConvParams params_of(const Conv2dGeometry& g) {
  check_sizes(g);
  ConvParams p;
  p.N = int(g.N), p.C = int(g.C), p.H = int(g.H), p.W = int(g.W), p.K = int(g.K);
  p.R = int(g.R), p.S = int(g.S), p.P = int(g.P()), p.Q = int(g.Q());
  p.pad_h = int(g.pad_h), p.pad_w = int(g.pad_w);
  p.stride_h = int(g.stride_h), p.stride_w = int(g.stride_w);
  p.dilation_h = int(g.dilation_h), p.dilation_w = int(g.dilation_w);
  p.Cg = p.C / int(g.groups), p.Kg = p.K / int(g.groups);
  p.HW = p.H * p.W, p.PQ = p.P * p.Q, p.RS = p.R * p.S, p.CRS = p.Cg * p.RS;
  p.by_PQ = FastDivmod(p.PQ), p.by_Q = FastDivmod(p.Q), p.by_HW = FastDivmod(p.HW);
  p.by_W = FastDivmod(p.W), p.by_RS = FastDivmod(p.RS), p.by_S = FastDivmod(p.S);
  p.by_stride_h = FastDivmod(p.stride_h), p.by_stride_w = FastDivmod(p.stride_w);
  return p;
}

inline bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// Blocks of a grid's y axis: groups times tiles of the GEMM's rows.
inline unsigned grid_y(const Conv2dGeometry& g, int64_t rows_per_group, int bm) {
  const int64_t y = g.groups * ((rows_per_group + bm - 1) / bm);
  if (y > 65535) {
    throw Error("conv2d on CUDA: " + std::to_string(g.groups) + " groups of " +
                std::to_string(rows_per_group) + " channels need a grid of " + std::to_string(y) +
                " rows; at most 65535 are supported");
  }
  return unsigned(y);
}

}  // namespace crema::kernels::cuda::implicit_gemm
