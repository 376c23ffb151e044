// What the grouped NHWC kernels share (convolution_grouped_nhwc_cuda.cu: forward and backward
// data; convolution_grouped_nhwc_filter_cuda.cu: the filter gradient): a group's run of channels
// read as whole vectors.
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

}  // namespace crema::kernels::cuda::grouped_nhwc
