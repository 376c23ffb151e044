// The fused optimizer update: one rule (SGD with momentum in Caffe's form, Nesterov, Adam, AdamW,
// RMSProp, AdaGrad) applied to a list of parameters in one pass over their memory, which also
// consumes (zeroes) the gradients. On a GPU the whole list is one launch (per 32 parameters).
//
// Gradient scaling, before the rule: every gradient is multiplied by one factor s,
//   s = m                                              without clipping
//   s = m * min(1, max_norm / (m * ||G|| + 1e-6))      with clipping (max_norm > 0)
// where m is the multiplier (1 / iter_size: the accumulated gradients become their mean) and
// ||G|| = sqrt(sum of g^2 over every element of every parameter in the list): PyTorch's
// torch.nn.utils.clip_grad_norm_(params, max_norm) applied to the mean gradient.
//
// The rules, per element, with g the scaled gradient, w the parameter, lr and wd this
// parameter's effective rate and decay (the solver's times lr_mult and decay_mult) and t the step
// (1 for the first update). Each is PyTorch's torch.optim formula except `sgd`, which is Caffe's:
//   sgd       v = momentum v + lr (g + wd w);  w = w - v      (momentum 0: w = w - lr (g + wd w))
//             (PyTorch's SGD keeps lr outside v: the same steps while lr is fixed; see README.md)
//   nesterov  d = g + wd w;  b = momentum b + d;  w = w - lr (d + momentum b)
//   adam      d = g + wd w;  m1 = beta1 m1 + (1 - beta1) d;  m2 = beta2 m2 + (1 - beta2) d^2
//             w = w - lr / (1 - beta1^t) * m1 / (sqrt(m2) / sqrt(1 - beta2^t) + eps)
//   adamw     w = w (1 - lr wd), then adam with d = g (decoupled weight decay)
//   rmsprop   d = g + wd w;  sq = alpha sq + (1 - alpha) d^2
//             centered: ga = alpha ga + (1 - alpha) d;  avg = sqrt(sq - ga^2) + eps
//             else:     avg = sqrt(sq) + eps
//             momentum > 0: b = momentum b + d / avg;  w = w - lr b
//             else:         w = w - lr d / avg
//   adagrad   d = g + wd w;  sum = sum + d^2
//             w = w - lr / (1 + (t - 1) lr_decay) * d / (sqrt(sum) + eps)
//
// The per-parameter state, by slot (PyTorch's names; optimizer_slot_name):
//   sgd, nesterov  0: momentum_buffer (sgd: only with momentum > 0)
//   adam, adamw    0: exp_avg (m1)        1: exp_avg_sq (m2)
//   rmsprop        0: square_avg (sq)     1: momentum_buffer (momentum > 0)   2: grad_avg
//   (centered) adagrad        0: sum (starts at initial_accumulator_value; every other slot starts
//   at 0)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class OptimizerType { sgd, nesterov, adam, adamw, rmsprop, adagrad };

// A rule and its hyper-parameters (a rule ignores the ones it does not use). Doubles, as the
// config gives them: the dispatch derives the float constants (1 - beta1, the bias corrections)
// in double and rounds once, as PyTorch does with its Python-float hyper-parameters.
struct OptimizerRule {
  OptimizerType type = OptimizerType::sgd;
  double momentum = 0.0;                   // sgd, nesterov, rmsprop
  double beta1 = 0.9;                      // adam, adamw
  double beta2 = 0.999;                    // adam, adamw
  double alpha = 0.99;                     // rmsprop
  double eps = 1e-8;                       // adam, adamw, rmsprop, adagrad
  bool centered = false;                   // rmsprop
  double lr_decay = 0.0;                   // adagrad
  double initial_accumulator_value = 0.0;  // adagrad: where `sum` starts
};

constexpr int kMaxOptimizerSlots = 3;
// The name of the rule's state in `slot` ("exp_avg"), or "" when the rule does not use it.
std::string optimizer_slot_name(const OptimizerRule& rule, int slot);
// The value the state in `slot` starts at.
float optimizer_slot_initial_value(const OptimizerRule& rule, int slot);

// How the gradients are scaled before the rule (see the top of this file).
struct GradientScaling {
  float multiplier = 1.0f;  // 1 / iter_size
  float max_norm = 0.0f;    // > 0: clip by the global norm; 0: no clipping
};

// One parameter as raw pointers: n elements of w, g and the used state slots (host pointers for
// cpu::, device pointers for cuda::; null for unused slots) and its effective lr and decay.
struct OptimizerSlice {
  float* w;
  float* g;  // read, then zeroed
  float* state[kMaxOptimizerSlots];
  int64_t n;
  float lr;
  float weight_decay;
};

namespace ref {
// The rules of the table above for n elements, one function per rule, in T arithmetic, reading
// like the formulas; g is the already scaled gradient, step is t. Instantiated for float and
// double. sgd_update always keeps Caffe's history v (with momentum 0 it just holds lr g').
template <class T>
void sgd_update(int64_t n, T* w, const T* g, T* v, T lr, T momentum, T weight_decay);
template <class T>
void nesterov_update(int64_t n, T* w, const T* g, T* b, T lr, T momentum, T weight_decay);
// decoupled: AdamW's decay of w instead of Adam's L2 term in the gradient.
template <class T>
void adam_update(int64_t n, T* w, const T* g, T* exp_avg, T* exp_avg_sq, T lr, T beta1, T beta2,
                 T eps, T weight_decay, bool decoupled, int64_t step);
// momentum_buffer is used when momentum > 0, grad_avg when centered (either may be null otherwise).
template <class T>
void rmsprop_update(int64_t n, T* w, const T* g, T* square_avg, T* momentum_buffer, T* grad_avg,
                    T lr, T alpha, T eps, T momentum, bool centered, T weight_decay);
template <class T>
void adagrad_update(int64_t n, T* w, const T* g, T* sum, T lr, T lr_decay, T eps, T weight_decay,
                    int64_t step);
// The factor s of the top of this file for gradients whose squares sum to `sum_of_squares`.
template <class T>
T gradient_scale(T sum_of_squares, T multiplier, T max_norm);
}  // namespace ref

namespace cpu {
// Every slice, in order: scale, update, zero g. The clipping norm is summed in a fixed order
// (the same bits for any thread count); large slices use up to `num_threads` OpenMP threads.
void optimizer_update(const OptimizerSlice* slices, int count, const OptimizerRule& rule,
                      int64_t step, GradientScaling scaling, int num_threads);
}  // namespace cpu

namespace cuda {
// per_tensor launches one update per slice; one_launch passes up to kMaxSlicesPerLaunch slices
// by value in the kernel's parameters and gives each its own range of blocks. Clipping adds a
// norm launch (per kMaxSlicesPerLaunch slices) and one finishing block before the update; the
// update reads the scale from device memory, so nothing waits for the host.
enum class OptimizerVersion { per_tensor, one_launch, best = one_launch };
constexpr int kMaxSlicesPerLaunch = 32;
// Bytes of device scratch optimizer_update needs for these slices (0 without clipping).
size_t optimizer_workspace_bytes(const OptimizerSlice* slices, int count, GradientScaling scaling);
void optimizer_update(const OptimizerSlice* slices, int count, const OptimizerRule& rule,
                      int64_t step, GradientScaling scaling, void* workspace,
                      OptimizerVersion version, gpu::Stream stream);
}  // namespace cuda

// One parameter of the Tensor-level update: its value, gradient and the rule's state tensors
// (one shape; null for the slots the rule does not use) and its effective lr and decay. Not owned.
struct OptimizerTensorSet {
  Tensor* w;
  Tensor* g;  // zeroed by the update
  Tensor* state[kMaxOptimizerSlots];
  float lr;
  float weight_decay;
};

// The update above for every set at step t = `step` (>= 1). Tensors are float32 on the context's
// device, each set's of one shape, with exactly the rule's slots given; otherwise crema::Error
// naming the set and the tensor. Scratch comes from ctx.workspace(); on a GPU nothing is read back
// and nothing allocated after the first call, so the update can be captured in a CUDA graph (the
// scalars lr, step and the rule's constants are then those of the capture).
void optimizer_update(Context& ctx, const OptimizerRule& rule, int64_t step,
                      const std::vector<OptimizerTensorSet>& sets, GradientScaling scaling = {});

}  // namespace crema::kernels
