// decode: gpu -- a batch's JPEG files decoded by nvJPEG and its transforms run as CUDA kernels
// on one GPU, into a batch in that GPU's memory (the loader's side: data/loader.h; the device
// side: data/gpu/).
//
// Per batch, on the decoder's own CUDA stream:
//   1. nvJPEG's batched decode of the files it takes (accepts(): the hardware JPEG engine of
//      A100/H100/H200 when the GPU has one, else its GPU backend), each to planar uint8 RGB (or
//      Y for one channel) at full size;
//   2. the other samples (PNG, CMYK, progressive files the hardware refuses, truncated files)
//      decoded on the CPU by the worker (libjpeg-turbo, stb_image), uploaded as uint8;
//   3. every sample's PixelPlan (data/pixel_plan.h: crop box, resize weights, flip, colour
//      steps, drawn on the CPU from the sample's Random as the CPU path draws them) run by one
//      kernel into the batch [B, C, H, W] float32, plus a mean and a blend kernel per contrast
//      step;
// then the worker waits for the stream, so a batch handed out is complete; the training stream
// copies it while the decoders work on the next ones (data/README.md, "GPU decoding").
//
// nvJPEG comes from the nvidia-nvjpeg wheel (CUDA 13), linked when CMake finds it
// (CREMA_NVJPEG_ROOT); a build without it has gpu_decoding_built() false and
// make_gpu_batch_decoder throws saying how to get it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/allocator.h"
#include "data/dataset.h"
#include "data/pixel_plan.h"

namespace crema::data {

// One sample of a batch as the GPU decoder takes it.
struct GpuSample {
  EncodedSample file;  // the file; nvJPEG decodes its bytes when on_gpu
  bool on_gpu = false;
  Image decoded;  // otherwise the CPU's decode, whole, at full size
  PixelPlan plan;
};

class GpuBatchDecoder {
 public:
  virtual ~GpuBatchDecoder() = default;
  // The height x width of the JPEG in `bytes` when nvJPEG decodes it here: a header nvJPEG
  // parses, 1 or 3 components (CMYK and YCCK go to the CPU), a coding its backend supports, and
  // the end-of-image marker present (a truncated file goes to the CPU decoder, whose error names
  // it). Otherwise nothing. Reads the header only.
  virtual std::optional<Size2> accepts(const uint8_t* bytes, size_t size) = 0;
  // Decodes and transforms `samples` into `out`, [samples.size(), C, H, W] float32 in this
  // decoder's GPU memory (C, H, W: every plan's), and waits until it is written. Returns false
  // when nvJPEG fails on the files (a corrupt scan): the caller then decodes them on the CPU.
  virtual bool run(const std::vector<GpuSample>& samples, float* out) = 0;
};

// Which of nvJPEG's backends decodes (`data.<split>.gpu_backend`): `automatic` the hardware JPEG
// engines where the GPU has them (A100, H100, H200), else the GPU (hybrid) one, Huffman decoding
// and IDCT on the SMs in a few batched launches; `hybrid` that one always; `mixed` every other
// decoder (loader worker) hybrid, so that the engines and the SMs decode at once (DALI's
// hw_decoder_load). The engines decode faster alone, but their batched path waits once per image
// for a small kernel that queues behind a training step's kernels (data/MEASUREMENTS.md, "GPU
// decoding": ResNet-50 training waited 10% with them, under 1% with hybrid and 6 workers).
enum class GpuJpegBackend { automatic, hybrid, mixed };

// Whether this build has nvJPEG (and CUDA).
bool gpu_decoding_built();
// A decoder on GPU `device` for images of `channels` (1 or 3) channels; one per loader worker
// (nvJPEG's decode state is not shared between threads). Throws crema::Error in a build without
// nvJPEG, naming how to get it.
std::unique_ptr<GpuBatchDecoder> make_gpu_batch_decoder(
    int device, int channels, GpuJpegBackend backend = GpuJpegBackend::automatic);
// The memory of GPU-decoded batches on `device`: a cache of device blocks that lives as long as
// the process (a batch may outlive its loader in the trainer's input feeder).
Allocator& gpu_batch_allocator(int device);

}  // namespace crema::data
