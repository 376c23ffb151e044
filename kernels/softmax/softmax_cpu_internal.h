// Softmax on the CPU, what softmax_cpu.cpp shares with the fused cross-entropy
// (kernels/loss/softmax_cross_entropy_cpu.cpp): the block of positions the inner > 1 layout
// handles together and its per-position max.
#pragma once

#include <algorithm>
#include <cstdint>

namespace crema::kernels::cpu::softmax_detail {

// Positions handled together in the inner > 1 layout (the per-position max and sum fit in L1).
constexpr int64_t kBlock = 256;
// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 13;

// Writes m[j] = max_c x[c * inner + j] for j < n.
inline void block_max(int64_t C, int64_t inner, int64_t n, const float* x, float* m) {
  for (int64_t j = 0; j < n; ++j) m[j] = x[j];
  for (int64_t c = 1; c < C; ++c) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) m[j] = std::max(m[j], x[c * inner + j]);
  }
}

}  // namespace crema::kernels::cpu::softmax_detail
