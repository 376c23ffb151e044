// kernels::pack_flat / unpack_flat on the CPU: every slice of an awkward case (sizes 1, 3, 7, 33,
// 0, ...; 70 slices; misaligned tensors and places; gaps) against the host conversions
// of core/float16.h element by element, bit for bit, in f32, bf16 and f16; what no slice covers
// left as it was; and the checks of the Tensor-level calls.
#include "kernels/cast/flat.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/float16.h"
#include "tests/kernels/pack_flat_test_util.h"
#include "tests/support/error_text.h"

namespace crema::kernels {
namespace {

using testing::FlatCase;

const DType kFlatTypes[] = {DType::f32, DType::bf16, DType::f16};

// The bits of element i of the flat buffer `t` (2 or 4 bytes).
uint32_t bits_at(const Tensor& t, int64_t i) {
  uint32_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(t.raw()) + i * dtype_size(t.dtype()),
              dtype_size(t.dtype()));
  return bits;
}

// x narrowed to `dtype` by the host conversions, as bits.
uint32_t narrowed_bits(float x, DType dtype) {
  if (dtype == DType::bf16) return f32_to_bf16_bits(x);
  if (dtype == DType::f16) return f32_to_f16_bits(x);
  return f32_bits(x);
}

// The f32 value of the element of `dtype` with these bits.
float widened(uint32_t bits, DType dtype) {
  if (dtype == DType::bf16) return bf16_to_f32(uint16_t(bits));
  if (dtype == DType::f16) return f16_to_f32(uint16_t(bits));
  return f32_from_bits(bits);
}

// Which buffer elements case `c` covers.
std::vector<bool> covered(const FlatCase& c) {
  std::vector<bool> in(size_t(c.flat), false);
  for (size_t k = 0; k < c.sizes.size(); ++k) {
    for (int64_t i = 0; i < c.sizes[k]; ++i) in[size_t(c.offsets[k] + i)] = true;
  }
  return in;
}

TEST(PackFlat, EverySliceMatchesTheHostConversions) {
  const FlatCase c = testing::awkward_flat_case(70);
  Tensor arena = testing::awkward_floats(c.arena, 3);
  const std::vector<FlatSlice> slices = testing::flat_slices(c, arena.data<float>());
  const std::vector<bool> in = covered(c);
  for (DType dtype : kFlatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor flat = testing::poisoned_host(c.flat, dtype);
    cpu::pack_flat(slices.data(), int(slices.size()), dtype, flat.raw(), 2);
    int wrong = 0;
    for (size_t k = 0; k < slices.size(); ++k) {
      for (int64_t i = 0; i < c.sizes[k]; ++i) {
        const float x = arena.data<float>()[c.starts[k] + i];
        wrong += bits_at(flat, c.offsets[k] + i) != narrowed_bits(x, dtype);
      }
    }
    EXPECT_EQ(wrong, 0);
    const uint32_t poison = dtype == DType::f32 ? 0xffffffffu : 0xffffu;
    int overwritten = 0;
    for (int64_t i = 0; i < c.flat; ++i) {
      overwritten += !in[size_t(i)] && bits_at(flat, i) != poison;
    }
    EXPECT_EQ(overwritten, 0) << "elements between the slices were written";
  }
}

TEST(UnpackFlat, EverySliceMatchesTheHostConversions) {
  const FlatCase c = testing::awkward_flat_case(70);
  for (DType dtype : kFlatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor flat = testing::random_bits(c.flat, dtype, 4);
    Tensor arena = testing::poisoned_host(c.arena, DType::f32);
    const std::vector<FlatSlice> slices = testing::flat_slices(c, arena.data<float>());
    cpu::unpack_flat(flat.raw(), dtype, slices.data(), int(slices.size()), 2);
    int wrong = 0;
    for (size_t k = 0; k < slices.size(); ++k) {
      for (int64_t i = 0; i < c.sizes[k]; ++i) {
        const float want = widened(bits_at(flat, c.offsets[k] + i), dtype);
        wrong += f32_bits(arena.data<float>()[c.starts[k] + i]) != f32_bits(want);
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

// Tensor level: a pack then an unpack gives back the f32 tensors, exactly where the buffer is f32
// and rounded once (to bf16 and back) where it is bf16.
TEST(PackFlat, TensorLevelRoundTrip) {
  Context ctx;
  const std::vector<int64_t> sizes = {7, 1, 33, 3};
  const std::vector<int64_t> offsets = {40, 0, 2, 35};
  std::vector<Tensor> tensors, back;
  for (size_t k = 0; k < sizes.size(); ++k) {
    tensors.push_back(testing::awkward_floats(sizes[k], 10 + k));
    back.push_back(testing::poisoned_host(sizes[k], DType::f32));
  }
  const std::vector<const Tensor*> in = {&tensors[0], &tensors[1], &tensors[2], &tensors[3]};
  const std::vector<Tensor*> out = {&back[0], &back[1], &back[2], &back[3]};
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor flat = testing::poisoned_host(47, dtype);
    pack_flat(ctx, in, offsets, flat);
    unpack_flat(ctx, flat, offsets, out);
    for (size_t k = 0; k < sizes.size(); ++k) {
      for (int64_t i = 0; i < sizes[k]; ++i) {
        const float x = tensors[k].data<float>()[i];
        const uint32_t want = f32_bits(widened(narrowed_bits(x, dtype), dtype));
        EXPECT_EQ(f32_bits(back[k].data<float>()[i]), want) << "tensor " << k << " element " << i;
      }
    }
  }
}

TEST(PackFlat, RefusesBadSlicesNamingTheTensor) {
  Context ctx;
  Tensor a({4}, DType::f32), b({3}, DType::f32), d({2}, DType::f64);
  a.fill(1.0f);
  b.fill(2.0f);
  Tensor flat({8}, DType::bf16);
  const auto pack_error = [&](const std::vector<const Tensor*>& tensors,
                              const std::vector<int64_t>& offsets) {
    return crema::testing::error_of([&] { pack_flat(ctx, tensors, offsets, flat); });
  };
  EXPECT_CONTAINS(pack_error({&a, &b}, {0, 6}),
                  "pack_flat: tensor 1 (3 elements at offset 6) falls outside flat (8 elements)");
  EXPECT_CONTAINS(pack_error({&a, &b}, {0, 3}), "pack_flat: tensors 0 and 1 overlap in flat");
  EXPECT_CONTAINS(pack_error({&a, &b}, {0}), "pack_flat: 2 tensors but 1 offsets");
  EXPECT_CONTAINS(pack_error({&a, &d}, {0, 4}), "pack_flat: tensor 1 is f64[2]");
  EXPECT_CONTAINS(crema::testing::error_of([&] { unpack_flat(ctx, flat, {-1}, {&a}); }),
                  "unpack_flat: tensor 0 (4 elements at offset -1) falls outside flat");
  Tensor wide({8}, DType::f64);
  EXPECT_CONTAINS(crema::testing::error_of([&] { pack_flat(ctx, {&a}, {0}, wide); }),
                  "pack_flat: no implementation for f64");
}

}  // namespace
}  // namespace crema::kernels
