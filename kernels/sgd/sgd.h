// The fused SGD-with-momentum update, Caffe's rule, in one pass over memory.
//
// For every element, with the solver's effective rate lr (base_lr times the policy times the
// parameter's lr_mult) and weight_decay (times its decay_mult):
//   g' = g + weight_decay * w        L2 regularization folded into the gradient
//   v  = momentum * v + lr * g'      the history, with lr inside it
//   w  = w - v
// PyTorch's SGD (dampening 0, not Nesterov) keeps lr outside the history instead:
//   v_t = momentum * v_t + g' ;  w = w - lr * v_t
// By induction v = lr * v_t while lr stays fixed, so both take exactly the same steps. They part
// when lr changes (a step policy): Caffe's history keeps the old steps at the old rate and lets
// them decay by momentum, PyTorch's rescales the whole history to the new rate at once. A
// checkpoint's momentum buffer is therefore not interchangeable between the two.
//
// sgd_momentum_update reads g only. w, g and v have one shape.
//
// A net has several parameters (LeNet: 8), and on a GPU a launch per parameter costs more than
// the update of a small one. sgd_momentum_update_multi updates a list of parameters, each with its
// own lr and weight_decay, in one launch per 16 parameters, and CONSUMES their gradients: g is
// zeroed in the same pass, which is the solver's "zero the gradients after the update" without a
// launch per parameter.
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

// One parameter of a multi-tensor update, as raw pointers: n elements of w, g and v (host
// pointers for cpu::, device pointers for cuda::) and this parameter's effective rate and decay.
struct SgdSlice {
  float* w;
  float* g;  // zeroed by the multi-tensor update
  float* v;
  int64_t n;
  float lr;
  float weight_decay;
};

namespace ref {
// The three lines above for n elements; explicitly instantiated for float and double.
template <class T>
void sgd_momentum_update(int64_t n, T* w, const T* g, T* v, T lr, T momentum, T weight_decay);
}  // namespace ref

namespace cpu {
// The same, vectorized, on up to `num_threads` OpenMP threads for large n.
void sgd_momentum_update(int64_t n, float* w, const float* g, float* v, float lr, float momentum,
                         float weight_decay, int num_threads);
// Each of the `count` slices in turn.
void sgd_momentum_update_multi(const SgdSlice* slices, int count, float momentum, int num_threads);
}  // namespace cpu

namespace cuda {
// sgd_momentum_update_multi: per_tensor launches one update per slice; one_launch passes up to
// kMaxSlicesPerLaunch slices by value in the kernel's parameters and gives each slice its own
// range of blocks, so a whole net updates in one launch.
enum class SgdVersion { per_tensor, one_launch, best = one_launch };
constexpr int kMaxSlicesPerLaunch = 16;
void sgd_momentum_update(int64_t n, float* w, const float* g, float* v, float lr, float momentum,
                         float weight_decay, gpu::Stream stream);
void sgd_momentum_update_multi(const SgdSlice* slices, int count, float momentum, SgdVersion version,
                               gpu::Stream stream);
}  // namespace cuda

// Tensor level: w, g, v of one shape, float32, on the context's device; throws crema::Error
// naming the tensors otherwise.
void sgd_momentum_update(Context& ctx, Tensor& w, const Tensor& g, Tensor& v, float lr,
                         float momentum, float weight_decay);

// One parameter of sgd_momentum_update_multi: its value, gradient and history (one shape) and
// its effective lr and weight_decay. The tensors are not owned.
struct SgdTensorSet {
  Tensor* w;
  Tensor* g;  // zeroed by the update
  Tensor* v;
  float lr;
  float weight_decay;
};
// The update above for every set, with one momentum, zeroing each g; the same checks per set (the
// message names the set's index). On a GPU: one launch per 16 sets.
void sgd_momentum_update_multi(Context& ctx, const std::vector<SgdTensorSet>& sets, float momentum);

}  // namespace crema::kernels
