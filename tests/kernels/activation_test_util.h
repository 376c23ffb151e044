// What the CPU and CUDA activation tests share: every kind with constants that are not the
// defaults, and the double-precision reference of a forward and backward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/activations/pointwise.h"

namespace crema::kernels::activation_test {

// Every kind, with constants that are not the defaults where a kind has any.
inline std::vector<Activation> all_activations() {
  using K = ActivationKind;
  return {{K::elu, 0.7f},
          {K::elu, 1.0f},
          {K::sigmoid},
          {K::tanh},
          {K::clip, 1.0f, 1.0f, -0.5f, 0.75f},
          {K::swish, 1.0f, 1.0f},
          {K::swish, 1.0f, 1.7f},
          {K::gelu_erf},
          {K::gelu_tanh},
          {K::hardsigmoid},
          {K::hardswish},
          {K::mish},
          {K::softsign}};
}

// Whether the backward pass reads the forward's output y (else its input x).
inline bool from_output(const Activation& a) {
  return backward_reads(a.kind) == BackwardReads::output;
}

// y = f(x) and dx = f'(x) dy through ref<double>, the backward fed what it reads (x or y).
inline void reference(const Activation& a, const std::vector<double>& x,
                      const std::vector<double>& dy, std::vector<double>& y,
                      std::vector<double>& dx) {
  const int64_t n = int64_t(x.size());
  y.resize(x.size());
  dx.resize(x.size());
  ref::activation_forward(a, n, x.data(), y.data());
  ref::activation_backward(a, n, (from_output(a) ? y : x).data(), dy.data(), dx.data());
}

}  // namespace crema::kernels::activation_test
