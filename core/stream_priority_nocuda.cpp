// A build without CUDA: no stream to make (core/cuda_runtime_nocuda.cpp says the same of the rest).
#include "core/error.h"
#include "core/stream_priority.h"

namespace crema::gpu {

Stream create_high_priority_stream() {
  throw Error(
      "this build of crema has no CUDA backend (nvcc was not found when it was built); "
      "use --device cpu or rebuild with the CUDA toolkit");
}

}  // namespace crema::gpu
