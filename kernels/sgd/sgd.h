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
// g is read only: zeroing the gradients after the update is the solver's business. w, g and v
// have one shape.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace crema::kernels {

namespace ref {
// The three lines above for n elements; explicitly instantiated for float and double.
template <class T>
void sgd_momentum_update(int64_t n, T* w, const T* g, T* v, T lr, T momentum, T weight_decay);
}  // namespace ref

namespace cpu {
// The same, vectorized, on up to `num_threads` OpenMP threads for large n.
void sgd_momentum_update(int64_t n, float* w, const float* g, float* v, float lr, float momentum,
                         float weight_decay, int num_threads);
}  // namespace cpu

// Tensor level: w, g, v of one shape, float32, on the context's device; throws crema::Error
// naming the tensors otherwise.
void sgd_momentum_update(Context& ctx, Tensor& w, const Tensor& g, Tensor& v, float lr,
                         float momentum, float weight_decay);

}  // namespace crema::kernels
