// Helpers shared by the CUDA kernel tests: host <-> device copies, NaN-poisoned device tensors
// and bitwise comparison (determinism checks).
#pragma once

#include <cstring>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::testing {

inline Tensor to_device(Context& ctx, const Tensor& host) {
  Tensor t = ctx.empty(host.shape());
  t.copy_from(host);
  return t;
}

inline Tensor to_device(Context& ctx, const Shape& shape, const std::vector<float>& values) {
  return to_device(ctx, Tensor::from_vector(shape, values));
}

// A device tensor full of NaN: a kernel that leaves any element unwritten leaves a NaN behind.
inline Tensor poisoned_device(Context& ctx, const Shape& shape) {
  Tensor t = ctx.empty(shape);
  ctx.fill(t, kNaN);
  return t;
}

// The elements on the host, after the context's stream has finished (a kernel's failure then
// surfaces here, with its message, rather than in the copy).
inline std::vector<float> host_values(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  return t.to_vector();
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace crema::kernels::testing
