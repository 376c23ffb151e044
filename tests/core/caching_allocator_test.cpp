#include "core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "core/error.h"

namespace crema {
namespace {

// A backend that counts its calls and fails above a budget, like a device running out of memory.
struct Backend {
  static inline int allocations = 0;
  static inline size_t budget = size_t(1) << 30, used = 0;
  static inline std::map<void*, size_t> sizes;
  static void* allocate(size_t bytes) {
    if (used + bytes > budget) throw DeviceError("out of memory");
    ++allocations;
    used += bytes;
    void* ptr = std::malloc(bytes);
    sizes[ptr] = bytes;
    return ptr;
  }
  static void release(void* ptr) {
    used -= sizes.at(ptr);
    sizes.erase(ptr);
    std::free(ptr);
  }
};

TEST(CachingAllocator, ReusesFreedBlocksAndCountsBytes) {
  Backend::allocations = 0;
  CachingAllocator a(Backend::allocate, Backend::release);
  void* p = a.allocate(1000);
  EXPECT_EQ(a.current_bytes(), 1024u);
  a.deallocate(p, 1000);
  EXPECT_EQ(a.current_bytes(), 0u);
  void* q = a.allocate(900);  // same rounded size: the cached block
  EXPECT_EQ(q, p);
  EXPECT_EQ(Backend::allocations, 1);
  void* r = a.allocate(5000);  // no fit: a new block
  EXPECT_NE(r, q);
  EXPECT_EQ(Backend::allocations, 2);
  EXPECT_EQ(a.peak_bytes(), 1024u + 5120u);
  a.deallocate(q, 900);
  a.deallocate(r, 5000);
  EXPECT_EQ(a.reserved_bytes(), 1024u + 5120u);
  a.release_cache();
  EXPECT_EQ(a.reserved_bytes(), 0u);
}

TEST(CachingAllocator, DoesNotHandOutBlocksFarTooLarge) {
  CachingAllocator a(Backend::allocate, Backend::release);
  void* big = a.allocate(size_t(8) << 20);
  a.deallocate(big, size_t(8) << 20);
  void* small = a.allocate(1024);
  EXPECT_NE(small, big);
  a.deallocate(small, 1024);
}

TEST(CachingAllocator, ReleasesTheCacheWhenTheBackendRunsOut) {
  Backend::budget = size_t(4) << 20;
  CachingAllocator a(Backend::allocate, Backend::release);
  void* p = a.allocate(size_t(2) << 20);
  a.deallocate(p, size_t(2) << 20);  // cached: the backend still holds 2 MiB
  // 3 MiB does not fit the cached block, and 2 + 3 MiB exceed the budget: the allocator gives
  // the cache back and succeeds on the second try.
  void* q = a.allocate(size_t(3) << 20);
  EXPECT_EQ(Backend::used, size_t(3) << 20);
  EXPECT_EQ(a.reserved_bytes(), size_t(3) << 20);
  a.deallocate(q, size_t(3) << 20);
  // Beyond the budget even with an empty cache: the backend's error reaches the caller.
  EXPECT_THROW(a.allocate(size_t(8) << 20), DeviceError);
  Backend::budget = size_t(1) << 30;
}

TEST(CachingAllocator, RoundsSizes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size((size_t(1) << 20) + 1), size_t(2) << 20);
}

}  // namespace
}  // namespace crema
