// Concat and slice, reference: the definitions of concat.h, one element at a time.
#include "kernels/concat/concat.h"

namespace crema::kernels::ref {

template <class T>
void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const T* const* parts, T* whole) {
  int64_t K = 0;
  for (int p = 0; p < num_parts; ++p) K += extents[p];
  int64_t start = 0;  // k_p
  for (int p = 0; p < num_parts; ++p) {
    for (int64_t o = 0; parts[p] != nullptr && o < outer; ++o) {
      for (int64_t k = 0; k < extents[p]; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          whole[(o * K + start + k) * inner + i] = parts[p][(o * extents[p] + k) * inner + i];
        }
      }
    }
    start += extents[p];
  }
}

template <class T>
void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const T* whole,
           T* const* parts) {
  int64_t K = 0;
  for (int p = 0; p < num_parts; ++p) K += extents[p];
  int64_t start = 0;
  for (int p = 0; p < num_parts; ++p) {
    for (int64_t o = 0; parts[p] != nullptr && o < outer; ++o) {
      for (int64_t k = 0; k < extents[p]; ++k) {
        for (int64_t i = 0; i < inner; ++i) {
          parts[p][(o * extents[p] + k) * inner + i] = whole[(o * K + start + k) * inner + i];
        }
      }
    }
    start += extents[p];
  }
}

template void concat<float>(int64_t, int64_t, int, const int64_t*, const float* const*, float*);
template void concat<double>(int64_t, int64_t, int, const int64_t*, const double* const*, double*);
template void slice<float>(int64_t, int64_t, int, const int64_t*, const float*, float* const*);
template void slice<double>(int64_t, int64_t, int, const int64_t*, const double*, double* const*);

}  // namespace crema::kernels::ref
