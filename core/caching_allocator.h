// CachingAllocator: keeps freed blocks and hands them out again, so a training step allocates
// nothing from the driver after the first one (cudaMalloc and cudaHostAlloc take milliseconds and
// synchronize the device). Used for device memory and for pinned host memory.
//
// Sizes are rounded up (to 512 bytes below 1 MiB, to whole MiB above) and a request takes the
// smallest cached block that fits and is at most twice its size. When the backend runs out of
// memory, the cache is released and the request tried once more.
//
// Device blocks are reused in stream order: crema runs all kernels that touch a context's tensors
// on its one compute stream, so a block freed by one kernel's tensor and reused by a later
// kernel's is never in use by both at once.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/allocator.h"

namespace crema {

class CachingAllocator final : public Allocator {
 public:
  // The backend: for device memory, bound to the Context's device (core/context.cpp).
  using RawAllocate = std::function<void*(size_t bytes)>;
  using RawFree = std::function<void(void* ptr)>;

  CachingAllocator(RawAllocate raw_allocate, RawFree raw_free);
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  size_t current_bytes() const override;
  size_t peak_bytes() const override;
  // Bytes held from the backend: in use plus cached.
  size_t reserved_bytes() const;
  // Returns every cached block to the backend.
  void release_cache();

  static size_t round_size(size_t bytes);

 private:
  void release_cache_locked();

  RawAllocate raw_allocate_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cached_;       // size -> free block
  std::unordered_map<void*, size_t> in_use_;  // block -> rounded size
  size_t current_ = 0, peak_ = 0, reserved_ = 0;
};

}  // namespace crema
