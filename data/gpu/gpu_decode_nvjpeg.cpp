// data/gpu_decode.h with nvJPEG: the batched decoder of one loader worker (its nvJPEG handle,
// decode state and CUDA stream), the uploads of the samples the CPU decoded, and the plans run
// by data/gpu/pixel_plan_cuda.h. Its memory, nvJPEG's included, comes from caches of its own, so
// that decoding never calls cudaFree (which waits for the whole device, training included).
#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/side_streams.h"
#include "data/gpu/pixel_plan_cuda.h"
#include "data/gpu_decode.h"

namespace crema::data {
namespace {

std::string status_text(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG:
      return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "allocator failure";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "implementation not supported";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "incomplete bitstream";
    default:
      return "status " + std::to_string(int(status));
  }
}

void check(nvjpegStatus_t status, const char* what) {
  if (status != NVJPEG_STATUS_SUCCESS) {
    throw DeviceError(std::string("nvJPEG ") + what + " failed: " + status_text(status));
  }
}

// Memory from a cache (device or pinned), given up for reuse when the scope ends; the caller has
// synchronized the stream that used it by then, or only its own stream reuses the cache.
class CachedBlock {
 public:
  CachedBlock(Allocator& cache, size_t bytes)
      : cache_(cache), bytes_(bytes), ptr_(bytes > 0 ? cache.allocate(bytes) : nullptr) {}
  ~CachedBlock() {
    if (ptr_ != nullptr) cache_.deallocate(ptr_, bytes_);
  }
  CachedBlock(const CachedBlock&) = delete;
  CachedBlock& operator=(const CachedBlock&) = delete;
  uint8_t* bytes() const { return static_cast<uint8_t*>(ptr_); }

 private:
  Allocator& cache_;
  size_t bytes_;
  void* ptr_;
};

// nvJPEG's own device or pinned memory (its handle's allocators, nvjpegCreateExV2), from a cache:
// after the first batches a decoder takes nothing from the driver, whose cudaFree and
// cudaFreeHost synchronize the whole device -- each would wait for the training step and every
// other worker's decode. A block nvJPEG frees may still be read by work queued on the decoder's
// stream, so it goes back to the cache only after run() has synchronized it (reuse_freed).
class NvjpegMemory {
 public:
  NvjpegMemory(CachingAllocator::RawAllocate allocate, CachingAllocator::RawFree free)
      : cache_(std::move(allocate), std::move(free)) {}
  CachingAllocator& cache() { return cache_; }
  void reuse_freed() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (void* ptr : freed_) cache_.deallocate(ptr, 0);
    freed_.clear();
  }
  // tDevMallocV2 / tPinnedMallocV2 and their frees: 0 for success, as cudaSuccess.
  static int nvjpeg_malloc(void* self, void** ptr, size_t bytes, cudaStream_t) {
    try {
      *ptr = bytes > 0 ? static_cast<NvjpegMemory*>(self)->cache_.allocate(bytes) : nullptr;
      return 0;
    } catch (const std::exception&) {
      return 1;
    }
  }
  static int nvjpeg_free(void* self, void* ptr, size_t, cudaStream_t) {
    auto* memory = static_cast<NvjpegMemory*>(self);
    std::lock_guard<std::mutex> lock(memory->mutex_);
    if (ptr != nullptr) memory->freed_.push_back(ptr);
    return 0;
  }

 private:
  CachingAllocator cache_;
  std::mutex mutex_;
  std::vector<void*> freed_;  // by nvJPEG, since the stream was last synchronized
};

class NvjpegBatchDecoder final : public GpuBatchDecoder {
 public:
  NvjpegBatchDecoder(int device, int channels, GpuJpegBackend backend)
      : device_(device),
        channels_(channels),
        device_memory_(
            [device](size_t bytes) {
              gpu::DeviceGuard guard(device);
              return gpu::device_allocate(bytes);
            },
            [device](void* ptr) {
              gpu::DeviceGuard guard(device);
              gpu::device_free(ptr);
            }),
        pinned_memory_(gpu::pinned_allocate, gpu::pinned_free) {
    gpu::DeviceGuard guard(device_);
    // The hardware engine where the GPU has one (A100, H100, H200: nvJPEG creates the handle and
    // reports engines), else Huffman decoding on the GPU; chroma upsampled by interpolation where
    // the backend offers it (as libjpeg's fancy upsampling), else by replication.
    // gpu_backend: hybrid skips the hardware engine; mixed gives every other decoder (loader
    // worker) the GPU backend, so that the engine and the SMs decode at once.
    static std::atomic<int> made{0};
    const bool hybrid_only = backend == GpuJpegBackend::hybrid ||
                             (backend == GpuJpegBackend::mixed && made++ % 2 == 1);
    nvjpegDevAllocatorV2_t device_allocator{NvjpegMemory::nvjpeg_malloc, NvjpegMemory::nvjpeg_free,
                                            &device_memory_};
    nvjpegPinnedAllocatorV2_t pinned_allocator{NvjpegMemory::nvjpeg_malloc,
                                               NvjpegMemory::nvjpeg_free, &pinned_memory_};
    unsigned engines = 0, cores = 0;
    for (nvjpegBackend_t backend : {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_GPU_HYBRID}) {
      if (hybrid_only && backend == NVJPEG_BACKEND_HARDWARE) continue;
      for (unsigned flags : {unsigned(NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION), 0u}) {
        nvjpegHandle_t handle = nullptr;
        if (handle_ != nullptr || nvjpegCreateExV2(backend, &device_allocator, &pinned_allocator,
                                                   flags, &handle) != NVJPEG_STATUS_SUCCESS) {
          continue;
        }
        // The capability query: a hardware handle that reports no engine is no use.
        if (backend == NVJPEG_BACKEND_HARDWARE &&
            nvjpegGetHardwareDecoderInfo(handle, &engines, &cores) == NVJPEG_STATUS_SUCCESS &&
            engines == 0) {
          nvjpegDestroy(handle);
          continue;
        }
        handle_ = handle;
        hardware_ = backend == NVJPEG_BACKEND_HARDWARE;
      }
    }
    if (handle_ == nullptr) {
      check(nvjpegCreateExV2(NVJPEG_BACKEND_DEFAULT, &device_allocator, &pinned_allocator, 0,
                             &handle_),
            "create");
    }
    static std::once_flag said;
    std::call_once(said, [&] {
      const std::string name = !hardware_ ? std::string("GPU (hybrid) backend")
                                  : engines > 0
                                      ? "hardware backend (" + std::to_string(engines) +
                                            " engines x " + std::to_string(cores) + " cores)"
                                      : std::string("hardware backend");
      std::fprintf(stderr, "crema: decode: gpu on cuda:%d with nvJPEG's %s%s\n", device_,
                   name.c_str(),
                   backend == GpuJpegBackend::mixed
                       ? " and the GPU (hybrid) one, every other worker"
                       : "");
    });
    check(nvjpegJpegStateCreate(handle_, &state_), "state create");
    check(nvjpegJpegStreamCreate(handle_, &header_), "stream create");
    // The hardware backend keeps its buffers in a pool once asked to pre-allocate (the sizes are
    // hints; NVIDIA's nvImageCodec asks for 1 x 1 and notes a gain above 20% in training).
    if (hardware_) {
      nvjpegDecodeBatchedPreAllocate(handle_, state_, 1, 1, 1, NVJPEG_CSS_444,
                                     channels_ == 3 ? NVJPEG_OUTPUT_RGB : NVJPEG_OUTPUT_Y);
    }
    // Non-blocking: the training loop's synchronous reads (on the legacy stream) need not wait
    // for this decoder's batch in flight (core/side_streams.h); run() synchronizes it itself.
    stream_ = gpu::create_nonblocking_stream();
  }

  ~NvjpegBatchDecoder() override {
    gpu::DeviceGuard guard(device_);
    synchronize();
    runner_.reset();
    nvjpegJpegStreamDestroy(header_);
    nvjpegJpegStateDestroy(state_);
    nvjpegDestroy(handle_);
    gpu::destroy_stream(stream_);
    device_memory_.reuse_freed();
    pinned_memory_.reuse_freed();
  }

  std::optional<Size2> accepts(const uint8_t* bytes, size_t size) override {
    if (size < 4 || bytes[size - 2] != 0xFF || bytes[size - 1] != 0xD9) return std::nullopt;
    int components = 0;
    nvjpegChromaSubsampling_t subsampling = NVJPEG_CSS_UNKNOWN;
    int widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
    if (nvjpegGetImageInfo(handle_, bytes, size, &components, &subsampling, widths, heights) !=
        NVJPEG_STATUS_SUCCESS) {
      return std::nullopt;
    }
    if ((components != 1 && components != 3) || subsampling == NVJPEG_CSS_UNKNOWN ||
        widths[0] <= 0 || heights[0] <= 0) {
      return std::nullopt;
    }
    if (hardware_) {
      int unsupported = 1;
      if (nvjpegJpegStreamParseHeader(handle_, bytes, size, header_) != NVJPEG_STATUS_SUCCESS ||
          nvjpegDecodeBatchedSupported(handle_, header_, &unsupported) != NVJPEG_STATUS_SUCCESS ||
          unsupported != 0) {
        return std::nullopt;
      }
    }
    return Size2{heights[0], widths[0]};
  }

  bool run(const std::vector<GpuSample>& samples, float* out) override {
    gpu::DeviceGuard guard(device_);
    // Every source planar uint8 at its offset; the CPU's decodes staged in pinned memory.
    std::vector<int64_t> offsets;
    size_t total = 0, staged = 0;
    for (const GpuSample& s : samples) {
      offsets.push_back(int64_t(total));
      const size_t bytes = size_t(channels_ * s.plan.source.height * s.plan.source.width);
      total += (bytes + 255) / 256 * 256;
      if (!s.on_gpu) staged += bytes;
    }
    // Back to the caches when run() returns, the stream synchronized (or, after an error, with
    // work of this stream alone still reading them: only this stream reuses these caches).
    const CachedBlock source_block(device_memory_.cache(), total);
    const CachedBlock stage_block(pinned_memory_.cache(), staged);
    uint8_t* sources = source_block.bytes();
    std::vector<const unsigned char*> data;
    std::vector<size_t> lengths;
    std::vector<nvjpegImage_t> images;
    std::vector<size_t> gray;  // samples of gray files decoded to RGB
    uint8_t* stage = stage_block.bytes();
    for (size_t i = 0; i < samples.size(); ++i) {
      const GpuSample& s = samples[i];
      const size_t plane = size_t(s.plan.source.height * s.plan.source.width);
      uint8_t* source = sources + offsets[i];
      if (s.on_gpu) {
        data.push_back(s.file.bytes.data());
        lengths.push_back(s.file.bytes.size());
        nvjpegImage_t image{};
        for (int c = 0; c < channels_; ++c) {
          image.channel[c] = source + c * plane;
          image.pitch[c] = size_t(s.plan.source.width);
        }
        images.push_back(image);
        if (channels_ == 3 && components(s.file.bytes) == 1) gray.push_back(i);
        continue;
      }
      // 0..255 floats (integers for 8-bit files) back to bytes, rounded.
      const size_t n = plane * size_t(channels_);
      for (size_t k = 0; k < n; ++k) {
        stage[k] = uint8_t(std::clamp(s.decoded.pixels[k] + 0.5f, 0.0f, 255.0f));
      }
      gpu::copy(source, stage, n, stream_);
      stage += n;
    }
    if (!data.empty()) {
      const nvjpegOutputFormat_t format = channels_ == 3 ? NVJPEG_OUTPUT_RGB : NVJPEG_OUTPUT_Y;
      // Initialized again for another batch size, and after a failure (which it resets).
      if (initialized_for_ != int(data.size())) {
        check(nvjpegDecodeBatchedInitialize(handle_, state_, int(data.size()), 1, format),
              "batch initialize");
        initialized_for_ = int(data.size());
      }
      if (nvjpegDecodeBatched(handle_, state_, data.data(), lengths.data(), images.data(),
                              stream_) != NVJPEG_STATUS_SUCCESS) {
        synchronize();
        initialized_for_ = 0;
        return false;
      }
    }
    // A gray file's Y in all three planes, as the CPU decoder copies it (whatever nvJPEG made of
    // the other two).
    for (size_t i : gray) {
      const size_t plane = size_t(samples[i].plan.source.height * samples[i].plan.source.width);
      uint8_t* source = sources + offsets[i];
      gpu::copy(source + plane, source, plane, stream_);
      gpu::copy(source + 2 * plane, source, plane, stream_);
    }
    std::vector<const PixelPlan*> plans;
    for (const GpuSample& s : samples) plans.push_back(&s.plan);
    if (!runner_) runner_ = std::make_unique<cuda::PlanRunner>();
    runner_->run(plans, offsets, sources, out, stream_);
    synchronize();
    return true;
  }

 private:
  // Waits for the stream; what nvJPEG freed meanwhile may then be reused.
  void synchronize() {
    gpu::synchronize(stream_);
    device_memory_.reuse_freed();
    pinned_memory_.reuse_freed();
  }

  // The number of components of an accepted JPEG (its header parsed again).
  int components(const std::vector<uint8_t>& bytes) {
    int count = 0;
    nvjpegChromaSubsampling_t subsampling = NVJPEG_CSS_UNKNOWN;
    int widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
    nvjpegGetImageInfo(handle_, bytes.data(), bytes.size(), &count, &subsampling, widths, heights);
    return count;
  }

  int device_, channels_;
  NvjpegMemory device_memory_, pinned_memory_;  // nvJPEG's buffers and a batch's sources
  bool hardware_ = false;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  nvjpegJpegStream_t header_ = nullptr;  // accepts()'s parsed header
  gpu::Stream stream_ = nullptr;
  int initialized_for_ = 0;  // the batch size nvjpegDecodeBatchedInitialize was last called for
  std::unique_ptr<cuda::PlanRunner> runner_;
};

}  // namespace

bool gpu_decoding_built() {
  return true;
}

std::unique_ptr<GpuBatchDecoder> make_gpu_batch_decoder(int device, int channels,
                                                        GpuJpegBackend backend) {
  CREMA_CHECK(channels == 1 || channels == 3, "decode: gpu decodes 1 or 3 channels");
  return std::make_unique<NvjpegBatchDecoder>(device, channels, backend);
}

Allocator& gpu_batch_allocator(int device) {
  static std::mutex mutex;
  static std::map<int, CachingAllocator*> caches;  // never freed: batches may outlive loaders
  std::lock_guard<std::mutex> lock(mutex);
  CachingAllocator*& cache = caches[device];
  if (cache == nullptr) {
    cache = new CachingAllocator(
        [device](size_t bytes) {
          gpu::DeviceGuard guard(device);
          return gpu::device_allocate(bytes);
        },
        [device](void* ptr) {
          gpu::DeviceGuard guard(device);
          gpu::device_free(ptr);
        });
  }
  return *cache;
}

}  // namespace crema::data
