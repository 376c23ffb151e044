// Concat and slice, fast CPU path: for each part p and outer index o, the K_p * inner elements
// of part p are contiguous in the part and in the whole, so the op is outer * P row copies
// (memcpy), spread over OpenMP threads when there is enough to move.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/concat/concat.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

// Calls copy(p, o, part_offset, whole_offset, count) for every row, in parallel.
template <class Copy>
void for_each_row(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
                  int num_threads, Copy copy) {
  std::vector<int64_t> start(size_t(num_parts) + 1, 0);
  for (int p = 0; p < num_parts; ++p) start[size_t(p) + 1] = start[size_t(p)] + extents[p];
  const int64_t K = start[size_t(num_parts)], rows = outer * num_parts;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (outer * K * inner >= kParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t o = row / num_parts;
    const int p = int(row % num_parts);
    const int64_t count = extents[p] * inner;
    if (count > 0) copy(p, o * count, (o * K + start[size_t(p)]) * inner, count);
  }
}

}  // namespace

void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const float* const* parts, float* whole, int num_threads) {
  for_each_row(outer, inner, num_parts, extents, num_threads,
               [&](int p, int64_t part_at, int64_t whole_at, int64_t count) {
                 if (parts[p] != nullptr) {
                   std::memcpy(whole + whole_at, parts[p] + part_at, size_t(count) * sizeof(float));
                 }
               });
}

void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const float* whole,
           float* const* parts, int num_threads) {
  for_each_row(outer, inner, num_parts, extents, num_threads,
               [&](int p, int64_t part_at, int64_t whole_at, int64_t count) {
                 if (parts[p] != nullptr) {
                   std::memcpy(parts[p] + part_at, whole + whole_at, size_t(count) * sizeof(float));
                 }
               });
}

}  // namespace crema::kernels::cpu
