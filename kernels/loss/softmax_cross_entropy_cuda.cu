// Softmax cross-entropy, CUDA versions (the SoftmaxVersion ladder of
// kernels/softmax/softmax_cuda.cu).
//
// Forward: the softmax kernels also take -log(max(prob[label], FLT_MIN)) at each counted
// position, accumulate it per thread in double, reduce per block in a fixed tree and finish in one
// block (kernels/common/reduce_cuda.cuh): the loss is the same bits on every run. With
// LeNet's batches (64 or 256 rows of 10) everything fits one block: one launch. With label
// smoothing (a separate instantiation, so the plain path is unchanged) the same pass also keeps
// z[label] (read before the exps overwrite the logits, which prob may alias), sum_c z and log(s),
// the pieces of the term log(s) - (1 - eps) z[label] - (eps / C) sum_c z.
//
// Backward: one thread per element of dlogits (one version). The `valid` normalizer needs the
// number of counted labels: for up to kCountInBlock positions each block counts them itself
// (cheaper than another launch); beyond, a counting kernel first writes per-block counts that
// every block adds up (kernels/common/count_cuda.cuh).
//
// Invalid labels (not an integer in [0, C), not the ignore_label) give a NaN loss and NaN
// dlogits at their position: kernels cannot throw, and the trainer stops on a non-finite loss.
#include <cfloat>
#include <cmath>

#include "kernels/common/count_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/loss/softmax_cross_entropy.h"
#include "kernels/loss/store_loss_cuda.cuh"
#include "kernels/softmax/softmax_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;
using detail::Partial;
using detail::StoreLoss;
using namespace softmax_detail;

// The backward sizes its grid with map_blocks and reduces with block_sum: one block size for both.
static_assert(detail::kMapThreads == kReduceThreads);

// Positions up to which the backward's blocks count the labels themselves.
constexpr int64_t kCountInBlock = 4096;

// --- labels ---

enum class LabelKind { counted, ignored, invalid };

struct LabelRule {
  int64_t C;
  detail::IgnoreRule ignore;
};

LabelRule label_rule(int64_t C, const SoftmaxLossOptions& options) {
  return {C, {options.has_ignore_label, float(options.ignore_label)}};
}

// The same test as the CPU dispatch's label check.
__device__ inline LabelKind classify(float v, const LabelRule& rule, int64_t& cls) {
  if (detail::is_ignored(v, rule.ignore)) return LabelKind::ignored;
  if (v >= 0.0f && v < float(rule.C) && v == floorf(v)) {
    cls = int64_t(v);
    return LabelKind::counted;
  }
  return LabelKind::invalid;
}

// -log(max(p, FLT_MIN)), the max written so that a NaN p stays NaN (fmaxf would drop it).
__device__ inline double loss_term(float p) {
  return double(-logf(p < FLT_MIN ? FLT_MIN : p));
}

// --- label smoothing: softmax of one distribution plus the pieces of its term ---

struct SmoothedParts {
  float log_sum;  // log(s)
  float z_label;  // z[label]; in the warp version only in the lane that owns the label, else 0
  float z_sum;    // sum_c z[c]; in the warp version this lane's share
};

// cls < 0: no label to read (an ignored or invalid position).
__device__ inline SmoothedParts smoothed_thread(int64_t C, int64_t inner, const float* x, float* y,
                                                int64_t cls) {
  float m = -INFINITY;
  for (int64_t c = 0; c < C; ++c) m = fmaxf(m, x[c * inner]);
  const float z_label = cls >= 0 ? x[cls * inner] - m : 0.0f;
  float sum = 0.0f, z_sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    const float z = x[c * inner] - m;
    const float e = expf(z);
    y[c * inner] = e;
    sum += e;
    z_sum += z;
  }
  const float inv = 1.0f / sum;
  for (int64_t c = 0; c < C; ++c) y[c * inner] *= inv;
  return {logf(sum), z_label, z_sum};
}

__device__ inline SmoothedParts smoothed_warp(int64_t C, int64_t inner, const float* x, float* y,
                                              int64_t cls, int lane) {
  float m = -INFINITY;
  for (int64_t c = lane; c < C; c += 32) m = fmaxf(m, x[c * inner]);
  m = warp_max(m);
  // Class cls is this lane's own, read before this lane overwrites it.
  const float z_label = cls >= 0 && cls % 32 == lane ? x[cls * inner] - m : 0.0f;
  float sum = 0.0f, z_sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float z = x[c * inner] - m;
    const float e = expf(z);
    y[c * inner] = e;
    sum += e;
    z_sum += z;
  }
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (int64_t c = lane; c < C; c += 32) y[c * inner] *= inv;
  return {logf(sum), z_label, z_sum};
}

// --- forward ---

// kSmooth: label smoothing with eps; otherwise Caffe's -log(max(prob[label], FLT_MIN)).
template <bool kSmooth>
__global__ void xent_forward_thread(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                    const float* labels, LabelRule rule, float eps, float* prob,
                                    Partial* partials, StoreLoss finish) {
  Partial acc{0.0, 0};
  for (int64_t pos = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pos < outer * inner;
       pos += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    int64_t cls = 0;
    const LabelKind kind = classify(labels[pos], rule, cls);
    if constexpr (kSmooth) {
      const SmoothedParts s = smoothed_thread(C, inner, logits + base, prob + base,
                                              kind == LabelKind::counted ? cls : -1);
      if (kind == LabelKind::counted) {
        acc.value += double(s.log_sum) - (1.0 - double(eps)) * double(s.z_label) -
                     double(eps) / double(C) * double(s.z_sum);
      }
    } else {
      softmax_thread<false>(C, inner, logits + base, prob + base);
      if (kind == LabelKind::counted) acc.value += loss_term(prob[base + cls * inner]);
    }
    if (kind == LabelKind::invalid) acc.value += double(NAN);
    acc.count += kind == LabelKind::ignored ? 0 : 1;
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

// The label's probability (or z) is in the lane that computed it: class cls belongs to lane
// cls % 32. With smoothing, lane 0 adds log(s) and every lane its share of sum_c z.
template <bool kSmooth>
__global__ void xent_forward_warp(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                  const float* labels, LabelRule rule, float eps, float* prob,
                                  Partial* partials, StoreLoss finish) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  Partial acc{0.0, 0};
  for (int64_t pos = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; pos < outer * inner;
       pos += warps) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    int64_t cls = 0;
    const LabelKind kind = classify(labels[pos], rule, cls);
    if constexpr (kSmooth) {
      const SmoothedParts s = smoothed_warp(C, inner, logits + base, prob + base,
                                            kind == LabelKind::counted ? cls : -1, lane);
      if (kind == LabelKind::counted) {
        acc.value += (lane == 0 ? double(s.log_sum) : 0.0) -
                     (1.0 - double(eps)) * double(s.z_label) -
                     double(eps) / double(C) * double(s.z_sum);
      }
    } else {
      softmax_warp<false>(C, inner, logits + base, prob + base, lane);
      if (kind == LabelKind::counted && cls % 32 == lane) {
        acc.value += loss_term(prob[base + cls * inner]);
      }
    }
    if (lane == 0) {
      if (kind == LabelKind::invalid) acc.value += double(NAN);
      acc.count += kind == LabelKind::ignored ? 0 : 1;
    }
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

// --- backward ---

// dlogits[o, c, i] = top_grad / normalizer * (prob - t), t = on [c == label] + off (on = 1 - eps,
// off = eps / C; with eps = 0 subtracting off is exact), 0 where ignored, NaN where the label is
// invalid. Index: the type of flat indices (int32 when they fit).
template <class Index>
__global__ void xent_backward_kernel(Index total, Index C, Index inner, const float* prob,
                                     const float* labels, const float* top_grad, LabelRule rule,
                                     detail::CountedNormalizer normalizer, float on, float off,
                                     float* dlogits) {
  const float scale = top_grad[0] / detail::block_normalizer(normalizer, labels, rule.ignore);
  for (Index k = blockIdx.x * Index(blockDim.x) + threadIdx.x; k < total;
       k += Index(gridDim.x) * blockDim.x) {
    const Index i = k % inner, rest = k / inner;
    const Index c = rest % C, o = rest / C;
    int64_t cls = 0;
    const LabelKind kind = classify(labels[o * inner + i], rule, cls);
    float d = 0.0f;
    if (kind == LabelKind::counted) {
      d = c == cls ? scale * (prob[k] - off - on) : scale * (prob[k] - off);
    } else if (kind == LabelKind::invalid) {
      d = NAN;
    }
    dlogits[k] = d;
  }
}

bool counts_first(int64_t positions, const SoftmaxLossOptions& options) {
  return options.normalization == LossNormalization::valid && positions > kCountInBlock;
}

}  // namespace

size_t softmax_cross_entropy_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                             const SoftmaxLossOptions& options,
                                             SoftmaxVersion version) {
  const int64_t positions = outer * inner;
  const size_t forward =
      detail::reduce_workspace_bytes(position_blocks(positions, use_warps(version, C, inner)));
  const size_t backward = counts_first(positions, options)
                              ? size_t(detail::count_blocks(positions)) * sizeof(Partial)
                              : 0;
  return forward > backward ? forward : backward;
}

void softmax_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                   const float* labels, const SoftmaxLossOptions& options,
                                   float* prob, float* loss, void* workspace,
                                   SoftmaxVersion version, gpu::Stream stream) {
  const int64_t positions = outer * inner;
  const bool warps = use_warps(version, C, inner);
  const int blocks = position_blocks(positions, warps);
  Partial* partials = static_cast<Partial*>(workspace);
  const StoreLoss finish{loss, options.normalization, outer, inner};
  const LabelRule rule = label_rule(C, options);
  const float eps = options.label_smoothing;
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, logits, labels, rule, eps, prob,
                                                  partials, finish);
  };
  if (eps > 0.0f) {
    launch(warps ? xent_forward_warp<true> : xent_forward_thread<true>);
  } else {
    launch(warps ? xent_forward_warp<false> : xent_forward_thread<false>);
  }
  gpu::check_launch("softmax_cross_entropy_forward");
  if (blocks > 1) {
    detail::finish_partials<<<1, kReduceThreads, 0, stream>>>(partials, blocks, finish);
    gpu::check_launch("softmax_cross_entropy_forward (finish)");
  }
}

void softmax_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                    const float* labels, const float* top_grad,
                                    const SoftmaxLossOptions& options, float* dlogits,
                                    void* workspace, gpu::Stream stream) {
  const int64_t positions = outer * inner, total = positions * C;
  if (total == 0) return;
  const LabelRule rule = label_rule(C, options);
  detail::CountedNormalizer normalizer{0, nullptr, 0, positions};
  if (options.normalization != LossNormalization::valid) {
    normalizer.fixed = loss_normalizer(options.normalization, outer, inner, 0);
  } else if (counts_first(positions, options)) {
    normalizer.counts = static_cast<const Partial*>(workspace);
    normalizer.num_counts = detail::count_blocks(positions);
    detail::count_not_ignored(positions, labels, rule.ignore, static_cast<Partial*>(workspace),
                              "softmax_cross_entropy_backward (count labels)", stream);
  }
  const float on = 1.0f - options.label_smoothing, off = options.label_smoothing / float(C);
  const int blocks = detail::map_blocks(total);
  if (detail::int32_indexable(total)) {
    xent_backward_kernel<int32_t><<<blocks, kReduceThreads, 0, stream>>>(
        int32_t(total), int32_t(C), int32_t(inner), prob, labels, top_grad, rule, normalizer, on,
        off, dlogits);
  } else {
    xent_backward_kernel<int64_t><<<blocks, kReduceThreads, 0, stream>>>(
        total, C, inner, prob, labels, top_grad, rule, normalizer, on, off, dlogits);
  }
  gpu::check_launch("softmax_cross_entropy_backward");
}

}  // namespace crema::kernels::cuda
