// Top-k accuracy, CUDA version: one thread per position counts the other classes that beat its
// label's score (greater or equal, or NaN: Caffe's tie rule, as accuracy_ref.cpp), C reads `inner`
// apart (coalesced across threads when inner > 1; LeNet's [N, 10] rows sit in a few cache lines).
// Each thread adds its (correct, counted) pairs, blocks add theirs in a fixed tree, one finishing
// block adds the block partials when there are several (kernels/common/reduce_cuda.cuh);
// the counts are integers, so the result is exact. An invalid label (not an integer in [0, C),
// not the ignore_label) adds NaN: the accuracy reads NaN instead of a kernel throwing.
#include <cmath>

#include "kernels/accuracy/accuracy.h"
#include "kernels/common/reduce_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;
using detail::Partial;

struct Rule {
  int64_t C;
  int top_k;
  bool has_ignore_label;
  float ignore_label;
};

// value = correct positions (exact in a double), count = counted positions.
struct StoreAccuracy {
  float* out;
  __device__ void operator()(Partial p) const {
    *out = p.count > 0 ? float(p.value / double(p.count)) : 0.0f;
  }
};

__global__ void accuracy_kernel(int64_t outer, int64_t inner, const float* __restrict__ scores,
                                const float* __restrict__ labels, Rule rule, Partial* partials,
                                StoreAccuracy finish) {
  Partial acc{0.0, 0};
  for (int64_t pos = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * blockDim.x) {
    const float v = labels[pos];
    if (rule.has_ignore_label && v == rule.ignore_label) continue;
    ++acc.count;
    if (!(v >= 0.0f && v < float(rule.C) && v == floorf(v))) {
      acc.value += double(NAN);
      continue;
    }
    const int64_t label = int64_t(v), o = pos / inner;
    const float* s = scores + o * rule.C * inner + (pos - o * inner);  // class c at s[c * inner]
    const float mine = s[label * inner];
    int64_t beating = 0;
    for (int64_t c = 0; c < rule.C; ++c) {
      const float other = s[c * inner];
      beating += (c != label && (other >= mine || isnan(other))) ? 1 : 0;
    }
    if (isnan(mine)) beating = rule.C - 1;  // a NaN of its own puts every other class above it
    if (beating < rule.top_k) acc.value += 1.0;
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

}  // namespace

size_t accuracy_workspace_bytes(int64_t positions) {
  return detail::reduce_workspace_bytes(detail::reduce_blocks(positions));
}

void accuracy(int64_t outer, int64_t C, int64_t inner, const float* scores, const float* labels,
              int top_k, bool has_ignore_label, int ignore_label, float* out, void* workspace,
              gpu::Stream stream) {
  const int blocks = detail::reduce_blocks(outer * inner);
  Partial* partials = static_cast<Partial*>(workspace);
  const Rule rule{C, top_k, has_ignore_label, float(ignore_label)};
  const StoreAccuracy finish{out};
  accuracy_kernel<<<blocks, kReduceThreads, 0, stream>>>(outer, inner, scores, labels, rule,
                                                         partials, finish);
  gpu::check_launch("accuracy");
  if (blocks > 1) {
    detail::finish_partials<<<1, kReduceThreads, 0, stream>>>(partials, blocks, finish);
    gpu::check_launch("accuracy (finish)");
  }
}

namespace {

// The rule of ref::target_labels, a thread per position (reads `inner` apart, coalesced when
// inner > 1).
__global__ void target_labels_kernel(int64_t outer, int64_t C, int64_t inner, const float* targets,
                                     float* labels) {
  for (int64_t pos = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = pos / inner;
    const float* t = targets + o * C * inner + (pos - o * inner);
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c) {
      if (t[c * inner] > t[best * inner] || isnan(t[best * inner])) best = c;
    }
    labels[pos] = float(best);
  }
}

}  // namespace

void target_labels(int64_t outer, int64_t C, int64_t inner, const float* targets, float* labels,
                   gpu::Stream stream) {
  if (outer * inner == 0) return;
  target_labels_kernel<<<detail::reduce_blocks(outer * inner), kReduceThreads, 0, stream>>>(
      outer, C, inner, targets, labels);
  gpu::check_launch("target_labels");
}

}  // namespace crema::kernels::cuda
