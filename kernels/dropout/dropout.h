// Inverted dropout (Srivastava et al. 2014) with masks from a counter-based hash.
//
//   keep[i] = dropout_keep(seed, step, i, ratio)      (probability 1 - ratio)
//   forward:   y[i]  = keep[i] ? x[i]  / (1 - ratio) : 0
//   backward:  dx[i] = keep[i] ? dy[i] / (1 - ratio) : 0
// Kept units are scaled in training so that the test-time layer is the identity.
//
// The mask is a pure function of (seed, step, i) (dropout_hash.h), not a stored array: the CPU
// and the GPU draw the same mask bit for bit, and the backward recomputes the forward's mask
// instead of keeping it. `step` counts training forwards; it lives in device memory (a uint64 in
// the 8 bytes of a 2-element float32 tensor, see dropout_step_counter) and is advanced there by
// each forward, so a forward replayed from a CUDA graph still draws a new mask each time.
//
// Stochastic depth (Huang et al. 2016, "Deep Networks with Stochastic Depth"; torchvision.ops.
// StochasticDepth, mode "row") is dropout of whole samples: x viewed as [rows, row_size] (rows =
// the batch N), row n kept with keep(seed, step, n), probability 1 - ratio:
//   forward:   y[n, i]  = keep[n] ? x[n, i]  / (1 - ratio) : 0
//   backward:  dx[n, i] = keep[n] ? dy[n, i] / (1 - ratio) : 0
// with the same hash, counter and factor as dropout (the factor is 1 / (1 - ratio) rounded to
// float, then multiplied, as torchvision's noise.div_(survival_rate) then input * noise).
//
// y may alias x and dx may alias dy.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

// 1 / (1 - ratio), the factor of the kept units (ratio in [0, 1)).
inline float dropout_scale(float ratio) {
  return 1.0f / (1.0f - ratio);
}

namespace ref {
// Plain loops over n elements for one (seed, step); explicitly instantiated for float and double.
template <class T>
void dropout_forward(int64_t n, const T* x, T* y, float ratio, uint64_t seed, uint64_t step);
template <class T>
void dropout_backward(int64_t n, const T* dy, T* dx, float ratio, uint64_t seed, uint64_t step);
// Stochastic depth's mask on in [rows, row_size] into out (forward: x -> y; backward: dy -> dx).
template <class T>
void stochastic_depth(int64_t rows, int64_t row_size, const T* in, T* out, float ratio,
                      uint64_t seed, uint64_t step);
}  // namespace ref

namespace cpu {
// The same, on up to `num_threads` OpenMP threads for large n; bit for bit the reference's.
void dropout_forward(int64_t n, const float* x, float* y, float ratio, uint64_t seed, uint64_t step,
                     int num_threads);
void dropout_backward(int64_t n, const float* dy, float* dx, float ratio, uint64_t seed,
                      uint64_t step, int num_threads);
// One hash per row, then a vector loop over the row (a dropped row is only written); rows over
// threads for large tensors. Bit for bit the reference.
void stochastic_depth(int64_t rows, int64_t row_size, const float* in, float* out, float ratio,
                      uint64_t seed, uint64_t step, int num_threads);
}  // namespace cpu

namespace cuda {
// scalar: one element per thread; vectorized: 16 bytes per thread and access (4 floats, 8 bf16
// or f16; scalar where a pointer is not 16-byte aligned). T is float (bit for bit the
// reference's), bf16_t or f16_t (the same mask, the kept value scaled in float and rounded once).
// `step` points at the counter in device memory; dropout_advance adds one to it (one thread).
enum class DropoutVersion { scalar, vectorized, best = vectorized };

void dropout_advance(uint64_t* step, gpu::Stream stream);
template <class T>
void dropout_forward(int64_t n, const T* x, T* y, float ratio, uint64_t seed, const uint64_t* step,
                     DropoutVersion version, gpu::Stream stream);
template <class T>
void dropout_backward(int64_t n, const T* dy, T* dx, float ratio, uint64_t seed,
                      const uint64_t* step, DropoutVersion version, gpu::Stream stream);
// Blocks along the row (16-byte accesses where the row is a whole number of them and both
// pointers are 16-byte aligned) times rows; each thread hashes its row once; a dropped row is
// written without being read. T as dropout's: float bit for bit the reference.
template <class T>
void stochastic_depth(int64_t rows, int64_t row_size, const T* in, T* out, float ratio,
                      uint64_t seed, const uint64_t* step, gpu::Stream stream);
}  // namespace cuda

// A step counter at 0 on the context's device: a uint64 stored in a float32 tensor of 2 elements
// (device tensors are float32; the 8 bytes are only ever read as an integer).
Tensor dropout_step_counter(Context& ctx);
// The counter's value (synchronous: tests and logs).
uint64_t dropout_step_value(const Tensor& step);

// Tensor level: x and y (dy and dx) of one shape and dtype on the context's device (f32 on CPU
// and CUDA, f64 on the CPU, which runs ref::, bf16 and f16 on CUDA; stochastic depth f32 and
// f64 only); `step` from
// dropout_step_counter. The forward first advances the step, then applies its mask; the backward
// applies the mask of the current step (the last forward's). Throws crema::Error naming the
// tensors when they do not fit, and for a ratio outside [0, 1).
void dropout_forward(Context& ctx, const Tensor& x, Tensor& y, float ratio, uint64_t seed,
                     Tensor& step);
void dropout_backward(Context& ctx, const Tensor& dy, Tensor& dx, float ratio, uint64_t seed,
                      const Tensor& step);
// Stochastic depth, as dropout_forward / dropout_backward, on x [N, ...] (rows = dim 0, at least
// one axis).
void stochastic_depth_forward(Context& ctx, const Tensor& x, Tensor& y, float ratio, uint64_t seed,
                              Tensor& step);
void stochastic_depth_backward(Context& ctx, const Tensor& dy, Tensor& dx, float ratio,
                               uint64_t seed, const Tensor& step);

}  // namespace crema::kernels
