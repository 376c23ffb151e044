#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace crema {
namespace {

class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    constexpr size_t kAlign = 64;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* ptr = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (ptr == nullptr) throw std::bad_alloc();
    const size_t now = current_ += bytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return ptr;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::free(ptr);
    current_ -= bytes;
  }
  size_t current_bytes() const override { return current_; }
  size_t peak_bytes() const override { return peak_; }

 private:
  std::atomic<size_t> current_{0};
  std::atomic<size_t> peak_{0};
};

}  // namespace

// The host heap is process-wide by nature (like malloc); the counters are statistics only.
Allocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

}  // namespace crema
