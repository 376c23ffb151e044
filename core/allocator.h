// Allocator: where tensor storage comes from. The Context owns one per device; the CPU one hands
// out 64-byte-aligned host memory (a cache line, and what AVX-512 loads like).
#pragma once

#include <cstddef>

namespace crema {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  // Bytes handed out now, and the most ever handed out at once.
  virtual size_t current_bytes() const = 0;
  virtual size_t peak_bytes() const = 0;
};

// Aligned host memory. Thread-safe: tensors may be created and freed on loader threads.
Allocator& host_allocator();

}  // namespace crema
