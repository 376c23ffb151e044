// What the grouped NHWC kernels share (convolution_grouped_nhwc_cuda.cu: forward and backward
// data; convolution_grouped_nhwc_filter_cuda.cu: the filter gradient): a group's run of channels
// read as whole vectors, a strip's columns of a row, and the two kinds of products.
#pragma once

#include "kernels/convolution/convolution_depthwise_nhwc.cuh"

namespace crema::kernels::cuda::grouped_nhwc {

// Output channels a thread (one group's: Kg, and backward data's Cg, are multiples of it).
constexpr int kOT = 4;

// The elements of load_run's vectors for a run of N: the largest power of two of at most 16
// bytes that divides N (4, 8 or 16 channels of a group: 16 bytes, or 8 for 4 16-bit channels).
template <class E, int N>
__host__ __device__ constexpr int run_chunk() {
  return N % E::kVec == 0 ? E::kVec : N % (E::kVec / 2) == 0 ? E::kVec / 2 : 1;
}

// N channels from p, widened, in vectors of run_chunk (p aligned to them: 16-byte aligned
// tensors and a group's first channel, a multiple of N).
template <class E, int N>
__device__ __forceinline__ void load_run(const typename E::T* p, float (&v)[N]) {
  constexpr int kChunk = run_chunk<E, N>();
#pragma unroll
  for (int at = 0; at < N; at += kChunk) {
    float part[kChunk];
    depthwise_nhwc::load_channels<E, kChunk>(p + at, part);
#pragma unroll
    for (int e = 0; e < kChunk; ++e) v[at + e] = part[e];
  }
}

// J consecutive pixels of a row, N channels each (pixel col0 + j at line + (col0 + j) * C), zero
// where the pixel lies outside [0, W): a strip's input columns, their loads all in flight.
template <class E, int N, int J>
__device__ __forceinline__ void load_columns(const typename E::T* line, int col0, int W, int C,
                                             float (&xs)[J][N]) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (unsigned(col0 + j) < unsigned(W)) {
      load_run<E, N>(line + int64_t(col0 + j) * C, xs[j]);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) xs[j][i] = 0.0f;
    }
  }
}

// The correlation's products of one tap for one output: acc[o] += sum_i f[o*CI + i] v[i].
template <int CI>
__device__ __forceinline__ void add_tap(float (&acc)[kOT], const float (&f)[kOT * CI],
                                        const float (&v)[CI]) {
#pragma unroll
  for (int o = 0; o < kOT; ++o) {
#pragma unroll
    for (int i = 0; i < CI; ++i) acc[o] = fmaf(f[o * CI + i], v[i], acc[o]);
  }
}

// The filter gradient's products of one output and tap: acc[o][c] += d[o] v[c].
template <int CG>
__device__ __forceinline__ void add_outer(float (&acc)[kOT][CG], const float (&d)[kOT],
                                          const float (&v)[CG]) {
#pragma unroll
  for (int o = 0; o < kOT; ++o) {
#pragma unroll
    for (int c = 0; c < CG; ++c) acc[o][c] = fmaf(d[o], v[c], acc[o][c]);
  }
}

}  // namespace crema::kernels::cuda::grouped_nhwc
