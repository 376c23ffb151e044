// The deterministic sum of the CPU paths (elementwise sums, the pointwise losses): the result is
// the same bits for any number of threads.
//
// The n terms are cut into fixed blocks of `block` terms; each block adds its terms into kSumLanes
// independent double accumulators, term k into lane k % kSumLanes (the compiler turns them into
// vector adds), adds the lanes in order, then the block's tail; the block sums are added in block
// order. Neither the blocks nor the lanes depend on the thread count, only the OpenMP threads
// that compute the blocks do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace crema::kernels::cpu {

constexpr int kSumLanes = 8;

// sum_k term(k) over k in [0, n), term returning a double; up to `num_threads` threads from
// `parallel_from` terms on (below, a parallel region costs more than it saves).
template <class Term>
double blocked_sum(int64_t n, int64_t block, int num_threads, int64_t parallel_from, Term term) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<double> partial(size_t(blocks), 0.0);
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= parallel_from)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * block, end = std::min(n, begin + block);
    double lane[kSumLanes] = {};
    int64_t k = begin;
    for (; k + kSumLanes <= end; k += kSumLanes) {
      for (int l = 0; l < kSumLanes; ++l) lane[l] += term(k + l);
    }
    double s = 0;
    for (int l = 0; l < kSumLanes; ++l) s += lane[l];
    for (; k < end; ++k) s += term(k);
    partial[size_t(b)] = s;
  }
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace crema::kernels::cpu
