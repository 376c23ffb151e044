// Context: everything a computation needs besides its tensors -- the device, the allocator for
// that device, the CUDA stream kernels run on, the seeded random generator, a reusable workspace
// and the CPU thread count.
// There is no global state in crema: a Context is created by the application and passed by
// reference to layers, kernels and solvers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_runtime.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"

namespace crema {

class Context {
 public:
  // A CUDA device must exist (DeviceError naming the devices present otherwise).
  explicit Context(Device device = Device::cpu(), uint64_t seed = 1, int num_threads = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  Allocator& allocator() { return *allocator_; }
  // Host memory for batches on their way to this device: pinned for a GPU, plain for the CPU.
  Allocator& staging_allocator() { return *staging_; }
  // The stream every kernel on this context runs on (null on the CPU).
  gpu::Stream stream() const { return stream_; }
  // Waits until every kernel queued on the stream has finished (no-op on the CPU).
  void synchronize();
  Random& random() { return random_; }
  // CPU threads kernels may use (0 at construction means: all the machine's cores).
  int num_threads() const { return num_threads_; }

  // New tensors on this context's device.
  Tensor empty(const Shape& shape, DType dtype = DType::f32);
  Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  // t[i] = value, on the stream (for tensors of this context's device; on a GPU float32, bf16 and
  // f16, the value rounded to the 16-bit type).
  void fill(Tensor& t, float value);
  // dst <- src between any devices, ordered on the stream (asynchronous for pinned host memory).
  void copy(Tensor& dst, const Tensor& src);

  // Scratch memory shared by all layers (Darknet's idea: one workspace sized by the largest
  // need). Its contents are valid until the next call. It grows, never shrinks, and a buffer it
  // outgrows is kept until the context ends: a CUDA graph captured earlier still points into it
  // (the test net may need more scratch than the captured training step did).
  float* workspace(size_t floats);

  // Measured algorithm choices, by key (op, pass, shape, device): an op that times its candidates
  // (convolution's find, kernels/convolution/select.h) measures a shape once per
  // context and remembers the winner's name here; `--algo-cache FILE` saves and reloads it.
  std::map<std::string, std::string>& algorithm_cache() { return algorithm_cache_; }

 private:
  Device device_;
  std::unique_ptr<Allocator> owned_allocator_, owned_staging_;  // CUDA contexts only
  Allocator* allocator_;
  Allocator* staging_;
  gpu::Stream stream_ = nullptr;
  Random random_;
  int num_threads_;
  Tensor workspace_;
  std::vector<Tensor> outgrown_workspaces_;
  std::map<std::string, std::string> algorithm_cache_;
};

}  // namespace crema
