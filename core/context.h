// Context: everything a computation needs besides its tensors -- the device, the allocator for
// that device, the seeded random generator, a reusable workspace and the CPU thread count.
// There is no global state in crema: a Context is created by the application and passed by
// reference to layers, kernels and solvers.
#pragma once

#include <cstdint>

#include "core/allocator.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"

namespace crema {

class Context {
 public:
  explicit Context(Device device = Device::cpu(), uint64_t seed = 1, int num_threads = 0);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  Allocator& allocator() { return *allocator_; }
  Random& random() { return random_; }
  // CPU threads kernels may use (0 at construction means: all the machine's cores).
  int num_threads() const { return num_threads_; }

  // New tensors on this context's device.
  Tensor empty(const Shape& shape, DType dtype = DType::f32);
  Tensor zeros(const Shape& shape, DType dtype = DType::f32);

  // Scratch memory shared by all layers (Darknet's idea: one workspace sized by the largest
  // need). Valid until the next call; grows, never shrinks during a run.
  float* workspace(size_t floats);

 private:
  Device device_;
  Allocator* allocator_;
  Random random_;
  int num_threads_;
  Tensor workspace_;
};

}  // namespace crema
