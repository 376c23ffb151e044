// Deterministic reductions for crema's CUDA kernels (included by .cu files only).
//
// A reduction over many positions (a sum, a loss, an accuracy count) runs in two levels:
//   1. each block reduces its positions: every thread accumulates its own positions in a fixed
//      order (a grid-stride loop over a grid whose size depends only on the problem size), then
//      the block adds its threads' partials in a fixed tree (warp butterflies, then one warp over
//      the warps' sums);
//   2. with one block the result is final; with several, each block stores its partial and one
//      more block adds them in block order (finish_partials).
// No float atomics anywhere, so the same inputs give the same bits on every run. The partial is a
// double value and an integer count, enough for sums (value), losses (value and the number of
// counted positions) and accuracies (correct and counted).
#pragma once

#include <cstdint>

namespace crema::kernels::cuda::detail {

// Threads per block of every reduction kernel; block_sum assumes it.
constexpr int kReduceThreads = 256;
// Most blocks a reduction launches (the finishing block adds at most this many partials).
constexpr int kMaxReduceBlocks = 1024;

struct Partial {
  double value;
  long long count;
};

__device__ inline Partial add(Partial a, Partial b) {
  return {a.value + b.value, a.count + b.count};
}

// The xor butterfly adds the same pairs in the same order on every lane (a + b == b + a in IEEE
// arithmetic), so every lane ends with the same bits.
__device__ inline Partial warp_sum(Partial p) {
  for (int offset = 16; offset > 0; offset /= 2) {
    p.value += __shfl_xor_sync(0xffffffffu, p.value, offset);
    p.count += __shfl_xor_sync(0xffffffffu, p.count, offset);
  }
  return p;
}

// Sum of p over the kReduceThreads threads of the block, in a fixed order; valid in warp 0.
// Every thread of the block must call it.
__device__ inline Partial block_sum(Partial p) {
  constexpr int kWarps = kReduceThreads / 32;
  __shared__ double values[kWarps];
  __shared__ long long counts[kWarps];
  p = warp_sum(p);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (lane == 0) {
    values[warp] = p.value;
    counts[warp] = p.count;
  }
  __syncthreads();
  if (warp == 0) {
    p = lane < kWarps ? Partial{values[lane], counts[lane]} : Partial{0.0, 0};
    p = warp_sum(p);
  }
  __syncthreads();  // the arrays may be reused by a next call
  return p;
}

// Blocks for a reduction over `work` items at `per_thread` items per thread: at least 1 (an empty
// input still writes its result), at most kMaxReduceBlocks.
inline int reduce_blocks(int64_t work, int64_t per_thread = 1) {
  const int64_t per_block = int64_t(kReduceThreads) * per_thread;
  const int64_t blocks = (work + per_block - 1) / per_block;
  return int(blocks < 1 ? 1 : (blocks > kMaxReduceBlocks ? kMaxReduceBlocks : blocks));
}

// Scratch bytes a reduction of `blocks` blocks needs (none for one block).
inline size_t reduce_workspace_bytes(int blocks) {
  return blocks > 1 ? size_t(blocks) * sizeof(Partial) : 0;
}

// The end of a reducing kernel, in every thread, with `block` from block_sum: one block calls
// finish(block) itself; several store their partials for finish_partials.
template <class Finish>
__device__ void publish(Partial block, Partial* partials, const Finish& finish) {
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    finish(block);
  } else {
    partials[blockIdx.x] = block;
  }
}

// One block of kReduceThreads: adds partials[0, count) in a fixed order and calls finish.
template <class Finish>
__global__ void finish_partials(const Partial* partials, int count, Finish finish) {
  Partial p{0.0, 0};
  for (int b = int(threadIdx.x); b < count; b += kReduceThreads) p = add(p, partials[b]);
  p = block_sum(p);
  if (threadIdx.x == 0) finish(p);
}

}  // namespace crema::kernels::cuda::detail
