// Top-k accuracy, CPU path: the reference's loop split over OpenMP threads by outer slices. The
// work is C comparisons per position, read once; there is nothing to block or reorder, so the
// only gain available is threads, and only for large inputs (segmentation-sized score maps).
#include "kernels/accuracy/accuracy.h"

#include <algorithm>
#include <cmath>

namespace crema::kernels::cpu {
namespace {
// Below this many scores one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 15;
}  // namespace

AccuracyCount accuracy(int64_t outer, int64_t C, int64_t inner, const float* scores,
                       const float* labels, int top_k, bool has_ignore_label, int ignore_label,
                       int num_threads) {
  int64_t correct = 0, counted = 0;
#pragma omp parallel for schedule(static) num_threads(std::max(1, num_threads)) \
    reduction(+ : correct, counted) if (outer * C * inner >= kParallelElements)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t label = int64_t(labels[o * inner + i]);
      if (has_ignore_label && label == ignore_label) continue;
      const float* s = scores + o * C * inner + i;  // class c at s[c * inner]
      const float mine = s[label * inner];
      // Other classes scoring at least as high, or NaN; a NaN of its own puts every other class
      // above it.
      int64_t beating = 0;
      for (int64_t c = 0; c < C; ++c) {
        beating += (c != label) & ((s[c * inner] >= mine) | std::isnan(s[c * inner]));
      }
      if (std::isnan(mine)) beating = C - 1;
      if (beating < top_k) ++correct;
      ++counted;
    }
  }
  return {correct, counted};
}

}  // namespace crema::kernels::cpu
