#include "core/caching_allocator.h"

#include <utility>

#include "core/error.h"

namespace crema {

CachingAllocator::CachingAllocator(RawAllocate raw_allocate, RawFree raw_free)
    : raw_allocate_(std::move(raw_allocate)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  release_cache_locked();
  for (const auto& [ptr, size] : in_use_) raw_free_(ptr);
}

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(1) << 20;
  const size_t unit = bytes < kLarge ? kSmall : kLarge;
  return bytes == 0 ? kSmall : (bytes + unit - 1) / unit * unit;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  size_t got = size;
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first <= 2 * size) {
    got = it->first;
    ptr = it->second;
    cached_.erase(it);
  } else {
    try {
      ptr = raw_allocate_(size);
    } catch (const DeviceError&) {
      release_cache_locked();  // fragmentation: give the cache back and try once more
      ptr = raw_allocate_(size);
    }
    reserved_ += size;
  }
  in_use_[ptr] = got;
  current_ += got;
  peak_ = std::max(peak_, current_);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  CREMA_CHECK(it != in_use_.end(), "freeing a block this allocator did not hand out");
  current_ -= it->second;
  cached_.emplace(it->second, ptr);
  in_use_.erase(it);
}

size_t CachingAllocator::current_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

size_t CachingAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

size_t CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

void CachingAllocator::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

void CachingAllocator::release_cache_locked() {
  for (const auto& [size, ptr] : cached_) {
    raw_free_(ptr);
    reserved_ -= size;
  }
  cached_.clear();
}

}  // namespace crema
