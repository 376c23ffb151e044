// Concat and slice, CUDA versions. Pure copies, so the element type is only a size: the tensors are
// moved in units of the widest of 16, 8, 4, 2, 1 bytes that divides a row of `inner` elements and
// every pointer's address (16 bytes: 4 floats or 8 bf16 / f16 per access), and inner is counted in
// those units. Thread i of part p moves unit i of the part, which is unit (o, j) = (i / row,
// i % row) of the part's rows of row = K_p * inner units, to or from
// whole[o * K * inner + k_p * inner + j]: reads and writes are both coalesced.
//   ConcatVersion::per_part  one launch per part.
//   ConcatVersion::fused     up to kMaxFusedParts parts per launch, blockIdx.y picking the part:
//                            the same work in P / 8 launches (a Concat of 4 bottoms: 1 launch,
//                            not 4, which is what a small net's step time is made of).
// 32-bit indices when the whole has at most 2^30 elements (cheaper division).
#include <type_traits>
#include <vector>

#include "kernels/common/map_cuda.cuh"
#include "kernels/concat/concat.h"

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

// The widest unit (16, 8, 4, 2 or 1 bytes) that divides `inner_bytes` and every pointer.
int unit_bytes(int64_t inner_bytes, int num_parts, const void* const* parts, const void* whole) {
  uintptr_t bits = uintptr_t(inner_bytes) | uintptr_t(whole);
  for (int p = 0; p < num_parts; ++p) bits |= uintptr_t(parts[p]);
  for (int unit = 16; unit > 1; unit /= 2) {
    if (bits % uintptr_t(unit) == 0) return unit;
  }
  return 1;
}

// The same pointers as pointers to Unit (const as they were).
template <class Unit, class Pointer>
std::vector<Unit*> as_units(int num_parts, const Pointer* parts) {
  std::vector<Unit*> units(size_t(num_parts), nullptr);
  for (int p = 0; p < num_parts; ++p) units[size_t(p)] = reinterpret_cast<Unit*>(parts[p]);
  return units;
}

// concat (kToWhole) or slice of `element_size`-byte elements, in the widest unit that fits.
template <bool kToWhole, class Pointer, class WholePointer>
void move_bytes(int64_t outer, int64_t inner, size_t element_size, int num_parts,
                const int64_t* extents, const Pointer* parts, WholePointer whole,
                ConcatVersion version, gpu::Stream stream, const char* what) {
  const int64_t inner_bytes = inner * int64_t(element_size);
  std::vector<const void*> addresses(parts, parts + num_parts);
  const int unit = unit_bytes(inner_bytes, num_parts, addresses.data(), whole);
  const auto run = [&](auto unit_value) {
    using Unit = decltype(unit_value);
    using PartUnit = std::conditional_t<kToWhole, const Unit, Unit>;
    using WholeUnit = std::conditional_t<kToWhole, Unit, const Unit>;
    const std::vector<PartUnit*> part_units = as_units<PartUnit>(num_parts, parts);
    launch<kToWhole>(outer, inner_bytes / unit, num_parts, extents, part_units.data(),
                     reinterpret_cast<WholeUnit*>(whole), version, stream, what);
  };
  switch (unit) {
    case 16:
      return run(uint4{});
    case 8:
      return run(uint2{});
    case 4:
      return run(uint32_t{});
    case 2:
      return run(uint16_t{});
    default:
      return run(uint8_t{});
  }
}

}  // namespace

template <class T>
void concat(int64_t outer, int64_t inner, int num_parts, const int64_t* extents,
            const T* const* parts, T* whole, ConcatVersion version, gpu::Stream stream) {
  move_bytes<true>(outer, inner, sizeof(T), num_parts, extents, parts, whole, version, stream,
                   "concat");
}

template <class T>
void slice(int64_t outer, int64_t inner, int num_parts, const int64_t* extents, const T* whole,
           T* const* parts, ConcatVersion version, gpu::Stream stream) {
  move_bytes<false>(outer, inner, sizeof(T), num_parts, extents, parts, whole, version, stream,
                    "slice");
}

#define CREMA_CONCAT_INSTANTIATE(T)                                                   \
  template void concat<T>(int64_t, int64_t, int, const int64_t*, const T* const*, T*, \
                          ConcatVersion, gpu::Stream);                                \
  template void slice<T>(int64_t, int64_t, int, const int64_t*, const T*, T* const*,  \
                         ConcatVersion, gpu::Stream);
CREMA_CONCAT_INSTANTIATE(float)
CREMA_CONCAT_INSTANTIATE(bf16_t)
CREMA_CONCAT_INSTANTIATE(f16_t)
#undef CREMA_CONCAT_INSTANTIATE

}  // namespace crema::kernels::cuda
