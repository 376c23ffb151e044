// Counting the values a loss keeps, on the GPU: the `valid` normalizer of a loss's backward is the
// number of targets (sigmoid cross-entropy) or labels (softmax cross-entropy) that are not the
// ignore_label. The counts are integers: exact, and the same, in any order.
//
// A backward block gets its normalizer from a CountedNormalizer: a fixed number when the
// normalization does not depend on the values; otherwise the per-block counts of a counting
// launch before it (count_not_ignored), added up by every block; or, for inputs small enough
// that another launch would cost more, the block counts the values itself.
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/common/reduce_cuda.cuh"

namespace crema::kernels::cuda::detail {

// The values left out: those equal to ignore_label (compared as floats), when has_ignore_label.
struct IgnoreRule {
  bool has_ignore_label;
  float ignore_label;
};

__device__ inline bool is_ignored(float v, const IgnoreRule& rule) {
  return rule.has_ignore_label && v == rule.ignore_label;
}

// The blocks of kReduceThreads that count n values, at least 16 values per thread.
inline int count_blocks(int64_t n) {
  return reduce_blocks(n, 16);
}

// counts[b].count for b < count_blocks(n): how many values of block b's grid-stride share of
// values[0, n) are not ignored. `what` names the launch in an error.
void count_not_ignored(int64_t n, const float* values, IgnoreRule rule, Partial* counts,
                       const char* what, gpu::Stream stream);

struct CountedNormalizer {
  int64_t fixed;          // > 0: the normalizer; 0: count
  const Partial* counts;  // count_not_ignored's, or null: count values[0, n) in the block
  int num_counts;
  int64_t n;
};

// Every thread of the block calls it (the branch is the same for all); returns
// float(max(counted, 1)), or float(fixed), in every thread.
__device__ inline float block_normalizer(const CountedNormalizer& c, const float* values,
                                         const IgnoreRule& rule) {
  if (c.fixed > 0) return float(c.fixed);
  __shared__ float result;
  Partial p{0.0, 0};
  if (c.counts != nullptr) {
    for (int b = int(threadIdx.x); b < c.num_counts; b += int(blockDim.x)) {
      p.count += c.counts[b].count;
    }
  } else {
    for (int64_t j = threadIdx.x; j < c.n; j += blockDim.x) {
      p.count += is_ignored(values[j], rule) ? 0 : 1;
    }
  }
  p = block_sum(p);
  if (threadIdx.x == 0) result = float(p.count > 1 ? p.count : 1);
  __syncthreads();
  return result;
}

}  // namespace crema::kernels::cuda::detail
