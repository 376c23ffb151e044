// The memory plan's two tools (the plan itself, Net::plan_memory, is in net_memory.cpp).
//
// A training step runs forward through layers 0..n-1 and backward through n-1..0; number its
// moments t = 0..2n (net_memory.cpp). Each activation and each activation gradient is needed over
// one interval [first, last] of moments: from the pass that writes it to the last pass that reads
// it. Two tensors whose intervals do not overlap may occupy the same bytes. The plan packs every
// tensor at an offset of one arena, fixed when the shapes are known: a step then allocates nothing
// and always touches the same addresses, so a captured CUDA graph stays valid.
//
// Packing (pack_blocks) is greedy by size, largest first (Pisarchyk and Lee, "Efficient memory
// management for deep neural net inference", 2020, "greedy by size"): each block takes the lowest
// offset where it overlaps, in bytes, no placed block whose interval overlaps its own. No arena
// can be smaller than the largest sum of sizes alive at one moment (peak_of_lives); this one
// equals it on LeNet, VGG-BN, the Fashion-MNIST ResNet, ResNet-18 and ResNet-50, and exceeds it by
// 0.02% on DenseNet-121 and 0.03% on MobileNetV2 (`crema summary`, 2026-11-26).
#pragma once

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace crema {

// Moments [first, last], both included; empty until a moment is added.
struct Lifetime {
  int first = std::numeric_limits<int>::max();
  int last = -1;
  bool empty() const { return last < first; }
  void add(int moment);
  bool overlaps(const Lifetime& other) const {
    return !empty() && !other.empty() && first <= other.last && other.first <= last;
  }
};

struct MemoryBlock {
  size_t bytes = 0;  // rounded up to kBlockAlignment by pack_blocks
  Lifetime life;
  size_t offset = 0;  // set by pack_blocks
};

// Offsets are multiples of this: what any kernel's vector loads need, and a GPU's cache line.
constexpr size_t kBlockAlignment = 256;

// Sets every non-empty block's offset so that blocks with overlapping lives never share a byte;
// returns the arena size (bytes). Deterministic: ties keep the blocks' order.
size_t pack_blocks(std::vector<MemoryBlock>& blocks);

// The most bytes alive at one moment: what any packing needs at least.
size_t peak_of_lives(const std::vector<MemoryBlock>& blocks);

// The blocks of one plan, and what each of them places (Net::memory_blocks, net_memory.cpp): the
// root blob of a group of values or of gradients, or a layer's backward scratch.
struct PlanBlocks {
  enum class Kind { value, grad, scratch };
  std::vector<MemoryBlock> blocks;
  std::vector<std::pair<size_t, Kind>> owner;  // (root blob, or layer for a scratch; kind)
  std::vector<size_t> value_root, grad_root;   // each blob's group root
  std::vector<bool> kept;                      // by value root: kept whole, outside the arena
  std::vector<bool> grad_alive;                // by grad root: some pass reads or writes it
};

// An Allocator that hands out one preset address: how a planned tensor gets its place in the
// arena (a Tensor takes its storage from an Allocator). Unplaced, it hands out null, so that a
// layer's reshape can give a planned top its shape without allocating anything. Asking a placed
// one for more bytes than its place holds is a bug in the plan (CREMA_CHECK). A planned tensor's
// clone() would get the same place: copy a planned value into ctx.empty(...) instead.
class PlacedAllocator final : public Allocator {
 public:
  void place(void* ptr, size_t bytes) { ptr_ = ptr, bytes_ = bytes; }
  void unplace() { ptr_ = nullptr, bytes_ = std::numeric_limits<size_t>::max(); }
  bool placed() const { return ptr_ != nullptr; }

  void* allocate(size_t bytes) override;
  void deallocate(void*, size_t) override {}  // the arena owns the bytes
  size_t current_bytes() const override { return 0; }
  size_t peak_bytes() const override { return 0; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = std::numeric_limits<size_t>::max();
};

}  // namespace crema
