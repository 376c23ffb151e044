// Unscaling the gradients of a loss-scaled step (fp16 training: optim/loss_scale.h), torch.amp's
// _amp_foreach_non_finite_check_and_unscale_: one pass over a list of gradient tensors that
//
//   multiplies every element by inv_scale (1 / the loss scale):   g = g * inv_scale
//   and records whether any element was inf or NaN:               found_inf = 1 if one was
//
// found_inf is only ever set, never cleared, so several calls accumulate into one flag; the
// caller zeroes it before the step and reads it after (the one read-back of a scaled step).
//
// One pass, not a check and then a multiply: the loop must know before the solver step whether
// the step overflowed, and both together cost one read and one write of every gradient. A
// non-finite gradient is multiplied too (inf stays inf, NaN stays NaN); the step is then skipped
// and the gradients zeroed, so what they hold does not matter.
//
// The finite test reads the bits: an element is inf or NaN exactly when its exponent bits are all
// ones ((bits & 0x7f800000) == 0x7f800000 for float): an integer test that vectorizes and that no
// fast-math flag can fold away. With the loss scale a power of two (torch's defaults keep it one),
// g * inv_scale is exact unless it falls below float's normal range.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

// One gradient as a raw pointer (host for cpu::, device for cuda::) and its element count.
struct GradientSlice {
  float* g;
  int64_t n;
};

namespace ref {
// The formula on n elements in T arithmetic; returns whether any element was inf or NaN
// (std::isfinite). Instantiated for float and double.
template <class T>
bool unscale_gradients(int64_t n, T* g, T inv_scale);
}  // namespace ref

namespace cpu {
// Every slice in order; slices above 64K elements use up to `num_threads` OpenMP threads. Returns
// whether any element was inf or NaN.
bool unscale_gradients(const GradientSlice* slices, int count, float inv_scale, int num_threads);
}  // namespace cpu

namespace cuda {
// Up to kMaxUnscaleSlicesPerLaunch slices per launch, passed by value in the kernel's parameters,
// each owning a range of blocks (kernels/optimizers/optimizers_cuda.cu's one_launch layout). A
// thread that meets a non-finite element stores 1 into *found_inf (device memory): every writer
// stores the same value, so no atomic is needed and the result does not depend on the schedule.
// Nothing is read back or allocated: the pass can be captured in a CUDA graph.
constexpr int kMaxUnscaleSlicesPerLaunch = 32;
void unscale_gradients(const GradientSlice* slices, int count, float inv_scale, float* found_inf,
                       gpu::Stream stream);
}  // namespace cuda

// The pass above over `grads` (float32 tensors of any shapes on the context's device) with
// `found_inf` a float32 scalar on that device, set to 1 when any element was inf or NaN and left
// as it was otherwise. inv_scale must be finite and > 0. Otherwise crema::Error naming the tensor.
void unscale_gradients(Context& ctx, const std::vector<Tensor*>& grads, float inv_scale,
                       Tensor& found_inf);

}  // namespace crema::kernels
