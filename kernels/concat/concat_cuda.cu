// Concat and slice, CUDA versions. Thread i of part p moves element i of the part, which is
// element (o, j) = (i / row, i % row) of the part's rows of row = K_p * inner elements, to or from
// whole[o * K * inner + k_p * inner + j]: reads and writes are both coalesced.
//   ConcatVersion::per_part  one launch per part.
//   ConcatVersion::fused     up to kMaxFusedParts parts per launch, blockIdx.y picking the part:
//                            the same work in P / 8 launches (a Concat of 4 bottoms: 1 launch,
//                            not 4, which is what a small net's step time is made of).
// 32-bit indices when the whole has at most 2^30 elements (cheaper division).
#include "kernels/concat/concat.h"
#include "kernels/common/map_cuda.cuh"

namespace crema::kernels::cuda {
namespace {

// The parts of one launch: pointers (const for concat, which reads them), extents K_p and
// starts k_p in the whole.
template <class Pointer>
struct Parts {
  Pointer ptr[kMaxFusedParts];
  int64_t extent[kMaxFusedParts];
  int64_t start[kMaxFusedParts];
};

// kToWhole: concat (part -> whole); otherwise slice (whole -> part). A null part is skipped.
template <bool kToWhole, class Index, class Pointer, class WholePointer>
__global__ void move_parts(Index inner, Index K, Index outer, Parts<Pointer> parts,
                           WholePointer whole) {
  const int p = int(blockIdx.y);
  Pointer part = parts.ptr[p];
  if (part == nullptr) return;
  const Index row = Index(parts.extent[p]) * inner, n = outer * row;
  const Index base = Index(parts.start[p]) * inner, whole_row = K * inner;
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x); i < n;
       i += Index(gridDim.x) * Index(blockDim.x)) {
    const Index o = i / row;
    const Index w = o * whole_row + base + (i - o * row);
    if constexpr (kToWhole) {
      whole[w] = part[i];
    } else {
      part[i] = whole[w];
    }
  }
}

template <bool kToWhole, class Pointer, class WholePointer>
void launch(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const Pointer* parts, WholePointer whole, ConcatVersion version, gpu::Stream stream,
            const char* what) {
  int64_t K = 0;
  for (int p = 0; p < num_parts; ++p) K += extents[p];
  if (outer * K * inner == 0) return;
  const int per_launch = version == ConcatVersion::fused ? kMaxFusedParts : 1;
  int64_t start = 0;
  for (int first = 0; first < num_parts; first += per_launch) {
    const int count = num_parts - first < per_launch ? num_parts - first : per_launch;
    Parts<Pointer> chunk{};
    int64_t largest = 0;
    for (int c = 0; c < count; ++c) {
      chunk.ptr[c] = parts[first + c];
      chunk.extent[c] = extents[first + c];
      chunk.start[c] = start;
      start += extents[first + c];
      if (extents[first + c] > largest) largest = extents[first + c];
    }
    const dim3 grid(detail::map_blocks(outer * largest * inner), unsigned(count));
    if (detail::int32_indexable(outer * K * inner)) {
      move_parts<kToWhole, int32_t><<<grid, detail::kMapThreads, 0, stream>>>(
          int32_t(inner), int32_t(K), int32_t(outer), chunk, whole);
    } else {
      move_parts<kToWhole, int64_t>
          <<<grid, detail::kMapThreads, 0, stream>>>(inner, K, outer, chunk, whole);
    }
    gpu::check_launch(what);
  }
}

}  // namespace

void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const float* const* parts, float* whole, ConcatVersion version, gpu::Stream stream) {
  launch<true>(outer, inner, num_parts, extents, parts, whole, version, stream, "concat");
}

void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const float* whole,
           float* const* parts, ConcatVersion version, gpu::Stream stream) {
  launch<false>(outer, inner, num_parts, extents, parts, whole, version, stream, "slice");
}

}  // namespace crema::kernels::cuda
