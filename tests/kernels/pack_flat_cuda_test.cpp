// kernels::pack_flat / unpack_flat on CUDA against the CPU's (pack_flat_test.cpp checks those
// against the host conversions), bit for bit, in f32, bf16 and f16: the awkward case with 1 to
// 140 slices (up to three launches; sizes 1, 3, 7, 33, 0, ...; tensors and places on and off
// 16-byte boundaries, so both the 16-byte and the one-element paths), outputs and gaps poisoned
// first; one slice larger than its blocks cover in one step (the grid-stride loop); and the
// Tensor-level calls.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cast/flat.h"
#include "tests/kernels/half_test_util.h"
#include "tests/kernels/pack_flat_test_util.h"
#include "tests/support/cuda_test_util.h"

namespace crema::kernels {
namespace {

using testing::FlatCase;

const DType kFlatTypes[] = {DType::f32, DType::bf16, DType::f16};

Tensor on_host(Context& ctx, const Tensor& t) {
  ctx.synchronize();
  Tensor host(t.shape(), t.dtype());
  host.copy_from(t);
  return host;
}

// Packs case `c` on the GPU and on the CPU and compares the whole buffers (gaps included), then
// unpacks random bits on both and compares the whole arenas (what no slice covers included).
void expect_gpu_equals_cpu(Context& ctx, const FlatCase& c, uint64_t seed) {
  const Tensor arena = testing::awkward_floats(c.arena, seed);
  const Tensor arena_gpu = testing::device_copy(ctx, arena);
  for (DType dtype : kFlatTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor want = testing::poisoned_host(c.flat, dtype);
    std::vector<FlatSlice> host = testing::flat_slices(c, const_cast<float*>(arena.data<float>()));
    cpu::pack_flat(host.data(), int(host.size()), dtype, want.raw(), 1);
    Tensor flat = testing::device_copy(ctx, testing::poisoned_host(c.flat, dtype));
    std::vector<FlatSlice> device =
        testing::flat_slices(c, const_cast<float*>(arena_gpu.data<float>()));
    cuda::pack_flat(device.data(), int(device.size()), dtype, flat.raw(), ctx.stream());
    EXPECT_TRUE(testing::same_bytes(on_host(ctx, flat), want)) << "pack";

    const Tensor bits = testing::random_bits(c.flat, dtype, seed + 1);
    const Tensor bits_gpu = testing::device_copy(ctx, bits);
    Tensor unpacked = testing::poisoned_host(c.arena, DType::f32);
    host = testing::flat_slices(c, unpacked.data<float>());
    cpu::unpack_flat(bits.raw(), dtype, host.data(), int(host.size()), 1);
    Tensor unpacked_gpu = testing::device_copy(ctx, testing::poisoned_host(c.arena, DType::f32));
    device = testing::flat_slices(c, unpacked_gpu.data<float>());
    cuda::unpack_flat(bits_gpu.raw(), dtype, device.data(), int(device.size()), ctx.stream());
    EXPECT_TRUE(testing::same_bytes(on_host(ctx, unpacked_gpu), unpacked)) << "unpack";
  }
}

TEST(PackFlatCuda, AwkwardSlicesMatchTheCpuBitForBit) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  for (int count : {1, 5, 64, 65, 140}) {
    SCOPED_TRACE("slices: " + std::to_string(count));
    expect_gpu_equals_cpu(ctx, testing::awkward_flat_case(count), uint64_t(count));
  }
}

// One slice of 9M + 5 elements: more than its 4096 blocks move in one step (8.4M elements), so
// its threads loop; aligned (16-byte path) and, one element in, misaligned (one at a time).
TEST(PackFlatCuda, LargeSlicesLoop) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0));
  const int64_t n = 9'000'005;
  for (int64_t start : {0, 1}) {
    SCOPED_TRACE("start " + std::to_string(start));
    FlatCase c;
    c.starts = {start};
    c.offsets = {start};
    c.sizes = {n};
    c.arena = c.flat = n + start;
    expect_gpu_equals_cpu(ctx, c, 7);
  }
}

// The Tensor-level calls reach the CUDA path: a pack and an unpack in bf16 equal the CPU's.
TEST(PackFlatCuda, TensorLevelEqualsTheCpu) {
  CREMA_REQUIRE_CUDA();
  Context ctx(Device::cuda(0)), cpu;
  const std::vector<int64_t> sizes = {33, 1, 8, 7}, offsets = {3, 0, 48, 36};
  std::vector<Tensor> host, device, back;
  for (size_t k = 0; k < sizes.size(); ++k) {
    host.push_back(testing::awkward_floats(sizes[k], 20 + k));
    device.push_back(testing::device_copy(ctx, host[k]));
    back.push_back(testing::poisoned_as(ctx, {sizes[k]}, DType::f32));
  }
  Tensor want = testing::poisoned_host(56, DType::bf16);
  pack_flat(cpu, {&host[0], &host[1], &host[2], &host[3]}, offsets, want);
  Tensor flat = testing::device_copy(ctx, testing::poisoned_host(56, DType::bf16));
  pack_flat(ctx, {&device[0], &device[1], &device[2], &device[3]}, offsets, flat);
  EXPECT_TRUE(testing::same_bytes(on_host(ctx, flat), want));
  unpack_flat(ctx, flat, offsets, {&back[0], &back[1], &back[2], &back[3]});
  unpack_flat(cpu, want, offsets, {&host[0], &host[1], &host[2], &host[3]});
  for (size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_TRUE(testing::same_bytes(on_host(ctx, back[k]), host[k])) << "tensor " << k;
  }
}

}  // namespace
}  // namespace crema::kernels
