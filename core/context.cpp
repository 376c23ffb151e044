#include "core/context.h"

#include <thread>

#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/float16.h"

namespace crema {

Context::Context(Device device, uint64_t seed, int num_threads)
    : device_(device),
      allocator_(&host_allocator()),
      staging_(&host_allocator()),
      random_(seed),
      num_threads_(num_threads) {
  if (device_.is_cuda()) {
    gpu::use_device(device_.index);
    // Memory is allocated and freed with this context's device current, whichever thread asks.
    const int index = device_.index;
    owned_allocator_ = std::make_unique<CachingAllocator>(
        [index](size_t bytes) {
          gpu::DeviceGuard guard(index);
          return gpu::device_allocate(bytes);
        },
        [index](void* ptr) {
          gpu::DeviceGuard guard(index);
          gpu::device_free(ptr);
        });
    owned_staging_ = std::make_unique<CachingAllocator>(
        [index](size_t bytes) {
          gpu::DeviceGuard guard(index);
          return gpu::pinned_allocate(bytes);
        },
        [index](void* ptr) {
          gpu::DeviceGuard guard(index);
          gpu::pinned_free(ptr);
        });
    allocator_ = owned_allocator_.get();
    staging_ = owned_staging_.get();
    stream_ = gpu::create_stream();
  }
  if (num_threads_ <= 0) num_threads_ = int(std::max(1u, std::thread::hardware_concurrency()));
}

Context::~Context() {
  workspace_ = Tensor();
  outgrown_workspaces_.clear();
  if (stream_ != nullptr) {
    gpu::DeviceGuard guard(device_.index);
    gpu::destroy_stream(stream_);
  }
}

void Context::synchronize() {
  if (stream_ == nullptr) return;
  gpu::DeviceGuard guard(device_.index);
  gpu::synchronize(stream_);
}

Tensor Context::empty(const Shape& shape, DType dtype) {
  return Tensor(shape, dtype, device_, allocator_);
}

Tensor Context::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  fill(t, 0.0f);
  return t;
}

void Context::fill(Tensor& t, float value) {
  if (t.device().is_cpu()) {
    t.fill(value);
    return;
  }
  gpu::DeviceGuard guard(t.device().index);
  switch (t.dtype()) {
    case DType::f32:
      gpu::fill(t.data<float>(), size_t(t.numel()), value, stream_);
      return;
    case DType::bf16:
      gpu::fill(&t.data<bf16_t>()->bits, size_t(t.numel()), f32_to_bf16_bits(value), stream_);
      return;
    case DType::f16:
      gpu::fill(&t.data<f16_t>()->bits, size_t(t.numel()), f32_to_f16_bits(value), stream_);
      return;
    default:
      break;
  }
  throw Error(std::string("Context::fill: a ") + dtype_name(t.dtype()) +
              " tensor on " + t.device().str() + " (the GPU fills float32, bf16 and f16)");
}

void Context::copy(Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    dst.copy_from(src);
    return;
  }
  CREMA_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype(),
              "copy " + src.description() + " into " + dst.description());
  // On this context's GPU when it has one (its stream), else on the GPU the copy touches.
  gpu::DeviceGuard guard(device_.is_cuda() ? device_.index
                                           : (dst.device().is_cuda() ? dst : src).device().index);
  gpu::copy(dst.raw(), src.raw(), dst.nbytes(), stream_);
}

float* Context::workspace(size_t floats) {
  if (!workspace_.defined() || size_t(workspace_.numel()) < floats) {
    if (workspace_.defined()) outgrown_workspaces_.push_back(std::move(workspace_));
    workspace_ = empty({int64_t(floats)});
  }
  return workspace_.data<float>();
}

}  // namespace crema
