// A build without CUDA: no stream to make (core/cuda_runtime_nocuda.cpp says the same of the rest).
#include "core/error.h"
#include "core/side_streams.h"

namespace crema::gpu {
namespace {

[[noreturn]] void no_cuda() {
  throw Error(
      "this build of crema has no CUDA backend (nvcc was not found when it was built); "
      "use --device cpu or rebuild with the CUDA toolkit");
}

}  // namespace

Stream create_high_priority_stream() {
  no_cuda();
}

Stream create_nonblocking_stream() {
  no_cuda();
}

}  // namespace crema::gpu
