// Optimizer updates, CUDA. An update reads w, g and the rule's state and writes them back (20
// bytes per element for SGD, 28 for Adam) and computes little, so a kernel costs its memory
// traffic plus its launch; LeNet's parameters are 8 tensors of 10 to 400,000 elements, where the
// launches, not the bytes, dominate. Every element is updated by one thread with the CPU's
// arithmetic (optimizer_rules.h), so the result does not depend on the schedule.
//   OptimizerVersion::per_tensor  v1: one launch per parameter.
//   OptimizerVersion::one_launch  v2: up to kMaxSlicesPerLaunch parameters per launch: the
//                                 slices travel by value in the kernel's parameters
//                                 (__grid_constant__: read in place, not copied per thread) and
//                                 each owns a range of blocks, found by a scan of the ranges.
// Clipping (both versions): norm_kernel writes one double partial sum of g^2 per block (the same
// slices-by-value layout), one finishing block adds the partials in block order and stores the
// gradient factor in device memory, and the update kernel reads it there: no float atomics, no
// host round trip, the same bits on every run.
#include <algorithm>

#include "kernels/common/launch.h"
#include "kernels/common/reduce_cuda.cuh"
#include "kernels/optimizers/optimizer_rules.h"
#include "kernels/optimizers/optimizers.h"
#include "kernels/common/slice_blocks_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

using detail::Partial;

// The norm reduces with block_sum, which needs blocks of exactly kReduceThreads.
static_assert(kThreads == detail::kReduceThreads);
// Elements per thread a slice gets before it gets another block, and the most blocks per slice,
// for the update and for the norm (whose per-slice partials the finishing block adds).
constexpr int64_t kPerThread = 4;
constexpr int64_t kMaxBlocksPerSlice = 8192;
constexpr int64_t kNormPerThread = 8;
constexpr int64_t kMaxNormBlocksPerSlice = 128;

// An empty slice gets no block.
int update_blocks(int64_t n) {
  return int(std::min(kMaxBlocksPerSlice, ceil_div(n, kThreads * kPerThread)));
}
int norm_blocks(int64_t n) {
  return int(std::min(kMaxNormBlocksPerSlice, ceil_div(n, kThreads * kNormPerThread)));
}

// A slice as the update kernel reads it: pointers, size and the parameter's constants.
struct UpdateSlice {
  float* w;
  float* g;
  float* state[kMaxOptimizerSlots];
  int64_t n;
  rules::ParamConstants p;
};

struct UpdateBatch {
  UpdateSlice slices[kMaxSlicesPerLaunch];
  int first_block[kMaxSlicesPerLaunch + 1];
  int count;
};

// scale: the gradient factor in device memory (clipping), or null to use `multiplier`.
template <class R>
__global__ void update_kernel(const __grid_constant__ UpdateBatch batch,
                              const rules::RuleConstants r, float multiplier,
                              const float* __restrict__ scale) {
  const int k = slice_of_block(batch.first_block, batch.count);
  const UpdateSlice& s = batch.slices[k];
  const float factor = scale != nullptr ? *scale : multiplier;
  float* __restrict__ w = s.w;
  float* __restrict__ g = s.g;
  float* __restrict__ a = s.state[0];
  float* __restrict__ b = s.state[1];
  float* __restrict__ c = s.state[2];
  const int64_t stride = int64_t(batch.first_block[k + 1] - batch.first_block[k]) * kThreads;
  for (int64_t i = (int64_t(blockIdx.x) - batch.first_block[k]) * kThreads + threadIdx.x; i < s.n;
       i += stride) {
    float wi = w[i], s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if constexpr (R::slot0) s0 = a[i];
    if constexpr (R::slot1) s1 = b[i];
    if constexpr (R::slot2) s2 = c[i];
    rules::update_element<R>(r, s.p, g[i] * factor, wi, s0, s1, s2);
    w[i] = wi;
    if constexpr (R::slot0) a[i] = s0;
    if constexpr (R::slot1) b[i] = s1;
    if constexpr (R::slot2) c[i] = s2;
    g[i] = 0.0f;
  }
}

struct NormBatch {
  const float* g[kMaxSlicesPerLaunch];
  int64_t n[kMaxSlicesPerLaunch];
  int first_block[kMaxSlicesPerLaunch + 1];
  int count;
};

// partials[block] = the sum of g^2 over the block's elements, in double, in a fixed order.
__global__ void norm_kernel(const __grid_constant__ NormBatch batch, Partial* partials) {
  const int k = slice_of_block(batch.first_block, batch.count);
  const float* __restrict__ g = batch.g[k];
  const int64_t stride = int64_t(batch.first_block[k + 1] - batch.first_block[k]) * kThreads;
  Partial p{0.0, 0};
  for (int64_t i = (int64_t(blockIdx.x) - batch.first_block[k]) * kThreads + threadIdx.x;
       i < batch.n[k]; i += stride) {
    const double v = g[i];
    p.value += v * v;
  }
  p = detail::block_sum(p);
  if (threadIdx.x == 0) partials[blockIdx.x] = p;
}

// The finishing block's last step: the factor of optimizers.h from the total sum of squares.
struct StoreScale {
  float* scale;
  float multiplier;
  float max_norm;
  __device__ void operator()(Partial total) const {
    *scale = rules::gradient_scale(total.value, multiplier, max_norm);
  }
};

// Partial sums for every non-empty slice, one launch per kMaxSlicesPerLaunch slices; returns
// how many partials were written.
int launch_norms(const OptimizerSlice* slices, int count, Partial* partials, gpu::Stream stream) {
  int written = 0;
  NormBatch batch{};
  auto launch = [&] {
    if (batch.count == 0) return;
    norm_kernel<<<batch.first_block[batch.count], kThreads, 0, stream>>>(batch, partials + written);
    gpu::check_launch("optimizer_update (gradient norm)");
    written += batch.first_block[batch.count];
    batch = NormBatch{};
  };
  for (int k = 0; k < count; ++k) {
    if (slices[k].n <= 0) continue;
    batch.g[batch.count] = slices[k].g;
    batch.n[batch.count] = slices[k].n;
    batch.first_block[batch.count + 1] = batch.first_block[batch.count] + norm_blocks(slices[k].n);
    if (++batch.count == kMaxSlicesPerLaunch) launch();
  }
  launch();
  return written;
}

template <class R>
void launch_updates(const OptimizerSlice* slices, int count, const OptimizerRule& rule,
                    int64_t step, float multiplier, const float* scale, int per_launch,
                    gpu::Stream stream) {
  const rules::RuleConstants constants = rules::rule_constants(rule, step);
  UpdateBatch batch{};
  auto launch = [&] {
    if (batch.count == 0) return;
    update_kernel<R><<<batch.first_block[batch.count], kThreads, 0, stream>>>(batch, constants,
                                                                              multiplier, scale);
    gpu::check_launch("optimizer_update");
    batch = UpdateBatch{};
  };
  for (int k = 0; k < count; ++k) {
    const OptimizerSlice& s = slices[k];
    if (s.n <= 0) continue;
    batch.slices[batch.count] = {s.w,
                                 s.g,
                                 {s.state[0], s.state[1], s.state[2]},
                                 s.n,
                                 rules::param_constants(rule, step, s.lr, s.weight_decay)};
    batch.first_block[batch.count + 1] = batch.first_block[batch.count] + update_blocks(s.n);
    if (++batch.count == per_launch) launch();
  }
  launch();
}

int total_norm_blocks(const OptimizerSlice* slices, int count) {
  int blocks = 0;
  for (int k = 0; k < count; ++k) blocks += slices[k].n > 0 ? norm_blocks(slices[k].n) : 0;
  return blocks;
}

}  // namespace

size_t optimizer_workspace_bytes(const OptimizerSlice* slices, int count, GradientScaling scaling) {
  const int partials = total_norm_blocks(slices, count);
  if (!(scaling.max_norm > 0.0f) || partials == 0) return 0;
  return size_t(partials) * sizeof(Partial) + sizeof(float);
}

void optimizer_update(const OptimizerSlice* slices, int count, const OptimizerRule& rule,
                      int64_t step, GradientScaling scaling, void* workspace,
                      OptimizerVersion version, gpu::Stream stream) {
  const float* scale = nullptr;
  if (optimizer_workspace_bytes(slices, count, scaling) > 0) {
    // Layout: the partials, then the factor (16-byte partials keep it aligned).
    Partial* partials = static_cast<Partial*>(workspace);
    const int written = launch_norms(slices, count, partials, stream);
    float* factor = reinterpret_cast<float*>(partials + written);
    detail::finish_partials<<<1, kThreads, 0, stream>>>(
        partials, written, StoreScale{factor, scaling.multiplier, scaling.max_norm});
    gpu::check_launch("optimizer_update (clipping factor)");
    scale = factor;
  }
  const int per_launch = version == OptimizerVersion::per_tensor ? 1 : kMaxSlicesPerLaunch;
  rules::with_rule(rule, [&](auto r) {
    launch_updates<decltype(r)>(slices, count, rule, step, scaling.multiplier, scale, per_launch,
                                stream);
  });
}

}  // namespace crema::kernels::cuda
