#include "core/context.h"

#include <thread>

#include "core/error.h"

namespace crema {

Context::Context(Device device, uint64_t seed, int num_threads)
    : device_(device), allocator_(&host_allocator()), random_(seed), num_threads_(num_threads) {
  if (!device_.is_cpu()) {
    throw Error("device " + device_.str() + " is not available: this build of crema runs on the cpu only");
  }
  if (num_threads_ <= 0) num_threads_ = int(std::max(1u, std::thread::hardware_concurrency()));
}

Tensor Context::empty(const Shape& shape, DType dtype) {
  return Tensor(shape, dtype, device_, allocator_);
}

Tensor Context::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(0.0f);
  return t;
}

float* Context::workspace(size_t floats) {
  if (!workspace_.defined() || size_t(workspace_.numel()) < floats) {
    workspace_ = empty({int64_t(floats)});
  }
  return workspace_.data<float>();
}

}  // namespace crema
