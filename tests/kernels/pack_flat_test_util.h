// The cases of the flat pack and unpack tests (kernels/cast/flat.h), shared by the CPU test
// (against the host conversions, element by element) and the CUDA one (against the CPU, bit for
// bit): slices of awkward sizes at awkward places.
//
// A case's tensors are slices of one f32 "arena" (so one device copy serves them all): slice k's
// tensor is arena[starts[k], starts[k] + sizes[k]) and its place in the flat buffer
// [offsets[k], offsets[k] + sizes[k]).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/float16.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/cast/flat.h"

namespace crema::kernels::testing {

struct FlatCase {
  std::vector<int64_t> starts, offsets, sizes;
  int64_t arena = 0;  // elements of the arena
  int64_t flat = 0;   // elements of the flat buffer
};

// `count` slices (above cuda::kMaxFlatSlicesPerLaunch: several launches) of sizes cycling
// through 1, 3, 7, 33, 0 (empty), 8, 16, 1000, 4099 and 2: tails of 0 to 7 after the groups of 8.
// Their tensors start at 16-byte boundaries, except every third one, which starts one element
// past one. Their places in the buffer: every other one at a multiple of 8 elements (16 bytes in
// bf16 or f16, 32 in f32) after a gap, the others right after the one before (anywhere), so
// aligned-aligned slices take the 16-byte path and the rest the scalar one. The places are laid
// out in reverse (the last slice first): slice order and buffer order differ.
inline FlatCase awkward_flat_case(int count) {
  const int64_t kSizes[] = {1, 3, 7, 33, 0, 8, 16, 1000, 4099, 2};
  FlatCase c;
  for (int k = 0; k < count; ++k) {
    const int64_t n = kSizes[k % 10];
    c.arena = (c.arena + 7) / 8 * 8 + (k % 3 == 2 ? 1 : 0);  // 8 floats: 32 bytes
    c.starts.push_back(c.arena);
    c.sizes.push_back(n);
    c.arena += n;
  }
  c.offsets.assign(size_t(count), 0);
  for (int k = count; k-- > 0;) {
    if (k % 2 == 0) c.flat = (c.flat + 3) / 8 * 8 + 8;  // a gap of 4 to 11 elements
    c.offsets[size_t(k)] = c.flat;
    c.flat += c.sizes[size_t(k)];
  }
  c.flat += 5;  // padding after the last place too
  return c;
}

// The slices of case `c` over the arena at `arena` (host or device).
inline std::vector<FlatSlice> flat_slices(const FlatCase& c, float* arena) {
  std::vector<FlatSlice> slices;
  for (size_t k = 0; k < c.sizes.size(); ++k) {
    slices.push_back({arena + c.starts[k], c.offsets[k], c.sizes[k]});
  }
  return slices;
}

// n float32 values of every kind: every other one random bits (all exponents, NaNs, infinities),
// the others in [-2, 2], where bf16 and f16 are finite and normal.
inline Tensor awkward_floats(int64_t n, uint64_t seed) {
  Random rng(seed);
  Tensor t({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    t.data<float>()[i] =
        (i % 2 == 0) ? f32_from_bits(uint32_t(rng.next())) : float(rng.uniform(-2.0, 2.0));
  }
  return t;
}

// A host tensor of n elements of `dtype` holding random bits (every value of the format, NaNs
// with payloads included): what an unpack reads.
inline Tensor random_bits(int64_t n, DType dtype, uint64_t seed) {
  Random rng(seed);
  Tensor t({n}, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng.next());
  return t;
}

// A host tensor of n elements of `dtype`, every byte 0xff (a NaN in every float format): what a
// kernel leaves unwritten stays so.
inline Tensor poisoned_host(int64_t n, DType dtype) {
  Tensor t({n}, dtype);
  std::memset(t.raw(), 0xff, t.nbytes());
  return t;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace crema::kernels::testing
