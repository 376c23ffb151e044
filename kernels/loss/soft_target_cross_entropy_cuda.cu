// Soft-target cross-entropy, CUDA: the softmax's two walks over a distribution (a thread per
// position, or a warp per position when inner == 1 and C > 16: kernels/softmax/softmax_cuda.cuh's
// use_warps) with the term's pieces taken in the same pass.
//
// Forward: per position m = max z, then one pass over the classes computing exp z (stored), s,
// T = sum_c t'_c and sum_c t'_c z_c (each logit read before the same thread overwrites it with
// exp z: prob may alias the logits), then prob = exp z / s; the term T log s - sum_c t'_c z_c is
// accumulated per thread in double, reduced per block in a fixed tree and finished in one block
// (kernels/common/reduce_cuda.cuh): the same bits on every run.
//
// Backward: the same walk per position: T first, then dlogits = scale (prob T - t'). A thread per
// element would need T, a sum over the classes, for each of them.
#include <cmath>

#include "kernels/loss/soft_target_cross_entropy.h"
#include "kernels/loss/store_loss_cuda.cuh"
#include "kernels/softmax/softmax_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::kReduceThreads;
using detail::Partial;
using detail::StoreLoss;
using namespace softmax_detail;

// t' = on t + off: torch's label smoothing (on = 1 - eps, off = eps / C).
struct Smoothing {
  float on, off;
  __device__ float operator()(float t) const { return on * t + off; }
};

Smoothing smoothing(int64_t C, const SoftmaxLossOptions& options) {
  return {1.0f - options.label_smoothing, options.label_smoothing / float(C)};
}

// One position's softmax and term, walked by `lanes` threads starting at class `lane` (1 and 0:
// a thread; 32 and the lane: a warp, its partial sums then added across the warp). x, t, y at
// element (o, 0, i); classes `inner` apart. Returns the term (in every lane of a warp).
template <int kLanes>
__device__ inline double soft_term(int64_t C, int64_t inner, const float* x, const float* t,
                                   Smoothing smooth, float* y, int lane) {
  float m = -INFINITY;
  for (int64_t c = lane; c < C; c += kLanes) m = fmaxf(m, x[c * inner]);
  float s = 0.0f, t_sum = 0.0f, tz = 0.0f;
  if constexpr (kLanes == 32) m = warp_max(m);
  for (int64_t c = lane; c < C; c += kLanes) {
    const float z = x[c * inner] - m;
    const float target = smooth(t[c * inner]);
    t_sum += target;
    tz += target * z;
    const float e = expf(z);
    y[c * inner] = e;
    s += e;
  }
  if constexpr (kLanes == 32) {
    s = warp_sum(s);
    t_sum = warp_sum(t_sum);
    tz = warp_sum(tz);
  }
  const float inv = 1.0f / s;
  for (int64_t c = lane; c < C; c += kLanes) y[c * inner] *= inv;
  return double(t_sum) * double(logf(s)) - double(tz);
}

// A position per thread (kLanes 1) or per warp (kLanes 32); one lane of each adds the term.
template <int kLanes>
__global__ void soft_xent_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                  const float* targets, Smoothing smooth, float* prob,
                                  Partial* partials, StoreLoss finish) {
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int lane = kLanes == 1 ? 0 : int(threadIdx.x) % 32;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / kLanes;
  Partial acc{0.0, 0};
  for (int64_t pos = thread / kLanes; pos < outer * inner; pos += step) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    const double term =
        soft_term<kLanes>(C, inner, logits + base, targets + base, smooth, prob + base, lane);
    if (lane == 0) {
      acc.value += term;
      acc.count += 1;
    }
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

template <int kLanes>
__global__ void soft_xent_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                   const float* targets, const float* top_grad, float normalizer,
                                   Smoothing smooth, float* dlogits) {
  const float scale = top_grad[0] / normalizer;
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int lane = kLanes == 1 ? 0 : int(threadIdx.x) % 32;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / kLanes;
  for (int64_t pos = thread / kLanes; pos < outer * inner; pos += step) {
    const int64_t o = pos / inner, base = o * C * inner + (pos - o * inner);
    const float* p = prob + base;
    const float* t = targets + base;
    float t_sum = 0.0f;
    for (int64_t c = lane; c < C; c += kLanes) t_sum += smooth(t[c * inner]);
    if constexpr (kLanes == 32) t_sum = warp_sum(t_sum);
    for (int64_t c = lane; c < C; c += kLanes) {
      dlogits[base + c * inner] = scale * (p[c * inner] * t_sum - smooth(t[c * inner]));
    }
  }
}

}  // namespace

size_t soft_target_cross_entropy_workspace_bytes(int64_t outer, int64_t C, int64_t inner,
                                                 SoftmaxVersion version) {
  return detail::reduce_workspace_bytes(
      position_blocks(outer * inner, use_warps(version, C, inner)));
}

void soft_target_cross_entropy_forward(int64_t outer, int64_t C, int64_t inner, const float* logits,
                                       const float* targets, const SoftmaxLossOptions& options,
                                       float* prob, float* loss, void* workspace,
                                       SoftmaxVersion version, gpu::Stream stream) {
  const bool warps = use_warps(version, C, inner);
  const int blocks = position_blocks(outer * inner, warps);
  Partial* partials = static_cast<Partial*>(workspace);
  const StoreLoss finish{loss, options.normalization, outer, inner};
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kReduceThreads, 0, stream>>>(outer, C, inner, logits, targets,
                                                  smoothing(C, options), prob, partials, finish);
  };
  launch(warps ? soft_xent_forward<32> : soft_xent_forward<1>);
  gpu::check_launch("soft_target_cross_entropy_forward");
  if (blocks > 1) {
    detail::finish_partials<<<1, kReduceThreads, 0, stream>>>(partials, blocks, finish);
    gpu::check_launch("soft_target_cross_entropy_forward (finish)");
  }
}

void soft_target_cross_entropy_backward(int64_t outer, int64_t C, int64_t inner, const float* prob,
                                        const float* targets, const float* top_grad,
                                        const SoftmaxLossOptions& options, float* dlogits,
                                        SoftmaxVersion version, gpu::Stream stream) {
  const int64_t positions = outer * inner;
  if (positions * C == 0) return;
  const bool warps = use_warps(version, C, inner);
  const float normalizer = float(loss_normalizer(options.normalization, outer, inner, positions));
  auto launch = [&](auto kernel) {
    kernel<<<position_blocks(positions, warps), kReduceThreads, 0, stream>>>(
        outer, C, inner, prob, targets, top_grad, normalizer, smoothing(C, options), dlogits);
  };
  launch(warps ? soft_xent_backward<32> : soft_xent_backward<1>);
  gpu::check_launch("soft_target_cross_entropy_backward");
}

}  // namespace crema::kernels::cuda
