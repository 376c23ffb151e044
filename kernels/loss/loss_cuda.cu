// Pointwise losses, CUDA (one version each; see README.md).
//
// Forward (sigmoid cross-entropy, Euclidean): a grid-stride loop in which every thread adds the
// terms of its elements in double, a fixed tree per block (kernels/common/reduce_cuda.cuh),
// and, when there are several blocks, one more block that adds their partials in block order and
// divides by the normalizer, computed there from the count of counted elements. No float
// atomics: the same loss bits on every run. Up to 256 elements one block does everything.
//
// Backward: one thread per element. The scale top_grad[0] / normalizer is read on the device;
// the sigmoid's `valid` normalizer with an ignore_label needs the number of counted targets,
// which a counting kernel writes first as per-block counts that every backward block adds up
// (kernels/common/count_cuda.cuh).
#include <cmath>

#include "kernels/common/count_cuda.cuh"
#include "kernels/common/map_cuda.cuh"
#include "kernels/common/reduce_cuda.cuh"
#include "kernels/loss/loss.h"
#include "kernels/loss/store_loss_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::CountedNormalizer;
using detail::IgnoreRule;
using detail::is_ignored;
using detail::kReduceThreads;
using detail::Partial;
using detail::StoreLoss;

// The backwards size their grids with map_blocks and reduce with block_sum: one block size.
static_assert(detail::kMapThreads == kReduceThreads);

__global__ void sigmoid_cross_entropy_forward_kernel(int64_t n, const float* __restrict__ x,
                                                     const float* __restrict__ t, IgnoreRule rule,
                                                     Partial* partials, StoreLoss finish) {
  Partial acc{0.0, 0};
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const float xk = x[k], tk = t[k];
    if (is_ignored(tk, rule)) continue;
    // max(x,0) - x t in double: x t is exact there, and with large targets the terms nearly
    // cancel, so rounding them in float would cost digits of the sum.
    acc.value +=
        double(fmaxf(xk, 0.0f)) - double(xk) * double(tk) + double(log1pf(expf(-fabsf(xk))));
    ++acc.count;
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

__global__ void euclidean_loss_forward_kernel(int64_t n, const float* __restrict__ a,
                                              const float* __restrict__ b, Partial* partials,
                                              StoreLoss finish) {
  Partial acc{0.0, 0};
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const double d = a[k] - b[k];  // the float difference, squared in double (as the CPU)
    acc.value += d * d;
    ++acc.count;
  }
  detail::publish(detail::block_sum(acc), partials, finish);
}

__global__ void sigmoid_cross_entropy_backward_kernel(int64_t n, const float* __restrict__ x,
                                                      const float* __restrict__ t,
                                                      const float* __restrict__ top_grad,
                                                      IgnoreRule rule, CountedNormalizer normalizer,
                                                      float* dx) {
  const float scale = top_grad[0] / detail::block_normalizer(normalizer, t, rule);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const float tk = t[k];
    const float sigmoid = 1.0f / (1.0f + expf(-x[k]));
    dx[k] = is_ignored(tk, rule) ? 0.0f : scale * (sigmoid - tk);
  }
}

// da = scale (a - b), db = -scale (a - b); a null output is skipped (the same for every thread).
__global__ void euclidean_loss_backward_kernel(int64_t n, const float* __restrict__ a,
                                               const float* __restrict__ b,
                                               const float* __restrict__ top_grad, float normalizer,
                                               float* da, float* db) {
  const float scale = top_grad[0] / normalizer;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const float d = a[k] - b[k];
    if (da != nullptr) da[k] = scale * d;
    if (db != nullptr) db[k] = -scale * d;
  }
}

}  // namespace

size_t pointwise_loss_workspace_bytes(int64_t n) {
  const size_t forward = detail::reduce_workspace_bytes(detail::reduce_blocks(n));
  const size_t counts = size_t(detail::count_blocks(n)) * sizeof(Partial);
  return forward > counts ? forward : counts;
}

void sigmoid_cross_entropy_forward(int64_t outer, int64_t inner, const float* x, const float* t,
                                   const SigmoidCrossEntropyOptions& options, float* loss,
                                   void* workspace, gpu::Stream stream) {
  const int64_t n = outer * inner;
  const int blocks = detail::reduce_blocks(n);
  Partial* partials = static_cast<Partial*>(workspace);
  const StoreLoss finish{loss, options.normalization, outer, inner, 1.0};
  const IgnoreRule rule{options.has_ignore_label, float(options.ignore_label)};
  sigmoid_cross_entropy_forward_kernel<<<blocks, kReduceThreads, 0, stream>>>(n, x, t, rule,
                                                                              partials, finish);
  gpu::check_launch("sigmoid_cross_entropy_forward");
  if (blocks > 1) {
    detail::finish_partials<<<1, kReduceThreads, 0, stream>>>(partials, blocks, finish);
    gpu::check_launch("sigmoid_cross_entropy_forward (finish)");
  }
}

void sigmoid_cross_entropy_backward(int64_t outer, int64_t inner, const float* x, const float* t,
                                    const float* top_grad,
                                    const SigmoidCrossEntropyOptions& options, float* dx,
                                    void* workspace, gpu::Stream stream) {
  const int64_t n = outer * inner;
  if (n == 0) return;
  const IgnoreRule rule{options.has_ignore_label, float(options.ignore_label)};
  CountedNormalizer normalizer{loss_normalizer(options.normalization, outer, inner, n), nullptr, 0,
                               n};
  if (options.normalization == LossNormalization::valid && options.has_ignore_label) {
    normalizer = {0, static_cast<const Partial*>(workspace), detail::count_blocks(n), n};
    detail::count_not_ignored(n, t, rule, static_cast<Partial*>(workspace),
                              "sigmoid_cross_entropy_backward (count targets)", stream);
  }
  sigmoid_cross_entropy_backward_kernel<<<detail::map_blocks(n), kReduceThreads, 0, stream>>>(
      n, x, t, top_grad, rule, normalizer, dx);
  gpu::check_launch("sigmoid_cross_entropy_backward");
}

void euclidean_loss_forward(int64_t outer, int64_t inner, const float* a, const float* b,
                            LossNormalization normalization, float* loss, void* workspace,
                            gpu::Stream stream) {
  const int64_t n = outer * inner;
  const int blocks = detail::reduce_blocks(n);
  Partial* partials = static_cast<Partial*>(workspace);
  const StoreLoss finish{loss, normalization, outer, inner, 0.5};
  euclidean_loss_forward_kernel<<<blocks, kReduceThreads, 0, stream>>>(n, a, b, partials, finish);
  gpu::check_launch("euclidean_loss_forward");
  if (blocks > 1) {
    detail::finish_partials<<<1, kReduceThreads, 0, stream>>>(partials, blocks, finish);
    gpu::check_launch("euclidean_loss_forward (finish)");
  }
}

void euclidean_loss_backward(int64_t outer, int64_t inner, const float* a, const float* b,
                             const float* top_grad, LossNormalization normalization, float* da,
                             float* db, gpu::Stream stream) {
  const int64_t n = outer * inner;
  if (n == 0 || (da == nullptr && db == nullptr)) return;
  const float normalizer = float(loss_normalizer(normalization, outer, inner, n));
  euclidean_loss_backward_kernel<<<detail::map_blocks(n), kReduceThreads, 0, stream>>>(
      n, a, b, top_grad, normalizer, da, db);
  gpu::check_launch("euclidean_loss_backward");
}

}  // namespace crema::kernels::cuda
