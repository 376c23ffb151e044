// data/gpu_decode.h in a build without nvJPEG (or without CUDA): decode: gpu is refused with the
// way to get it.
#include "core/error.h"
#include "data/gpu_decode.h"

namespace crema::data {

bool gpu_decoding_built() {
  return false;
}

std::unique_ptr<GpuBatchDecoder> make_gpu_batch_decoder(int, int, GpuJpegBackend) {
  throw Error(
      "decode: gpu needs nvJPEG, which this build of crema lacks: install the nvidia-nvjpeg wheel "
      "(pip install nvidia-nvjpeg, CUDA 13) and configure with -DCREMA_NVJPEG_ROOT=<its "
      "nvidia/cu13 folder> on a machine with nvcc, or use decode: cpu");
}

Allocator& gpu_batch_allocator(int) {
  return host_allocator();
}

}  // namespace crema::data
