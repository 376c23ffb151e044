// The CUDA runtime behind core/cuda_runtime.h.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_runtime.h"
#include "core/error.h"

namespace crema::gpu {
namespace {

std::string gib(size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string bytes_text(size_t bytes) {
  return std::to_string(bytes) + " bytes (" + gib(bytes) + ")";
}

void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw DeviceError("CUDA error in " + what + ": " + cudaGetErrorString(status));
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, size_t count, T value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

// One thread waits until `ns` nanoseconds of the GPU's global timer have passed.
__global__ void hold_kernel(long long ns) {
  long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

bool built_with_cuda() {
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky error, report none
    return 0;
  }
  return count;
}

std::string device_description(int index) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  return std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, " + gib(p.totalGlobalMem);
}

void use_device(int index) {
  const int count = device_count();
  if (count == 0)
    throw DeviceError("device cuda:" + std::to_string(index) +
                      " is not available: no CUDA GPU was found");
  if (index < 0 || index >= count) {
    throw DeviceError("device cuda:" + std::to_string(index) +
                      " is not available: this machine has " + std::to_string(count) +
                      " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1));
  }
  check(cudaSetDevice(index), "cudaSetDevice");
}

int current_device() {
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  return current;
}

DeviceGuard::DeviceGuard(int index) {
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current == index) return;
  check(cudaSetDevice(index), "cudaSetDevice");
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // a destructor cannot throw; it set it before
}

Stream create_stream() {
  cudaStream_t stream = nullptr;
  // A blocking stream: synchronous copies (cudaMemcpy on the legacy stream) wait for its kernels.
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  return stream;
}

void destroy_stream(Stream stream) {
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void synchronize(Stream stream) {
  check(cudaStreamSynchronize(stream), "a kernel (stream synchronize)");
}

void* device_allocate(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw DeviceError("out of memory on cuda:" + std::to_string(current_device()) + ": asked for " +
                      bytes_text(bytes) + ", " + bytes_text(free) + " free of " + gib(total) +
                      " (lower the batch size)");
  }
  check(status, "cudaMalloc");
  return ptr;
}

void device_free(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

void* pinned_allocate(size_t bytes) {
  void* ptr = nullptr;
  check(cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocDefault),
        "cudaHostAlloc of " + bytes_text(bytes));
  return ptr;
}

void pinned_free(void* ptr) {
  if (ptr != nullptr) cudaFreeHost(ptr);
}

MemoryInfo memory_info() {
  MemoryInfo info;
  check(cudaMemGetInfo(&info.free, &info.total), "cudaMemGetInfo");
  return info;
}

DeviceLimits device_limits() {
  DeviceLimits l;
  int device = 0, sms = 0, block = 0, sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) !=
          cudaSuccess) {
    cudaGetLastError();  // clear it: the plan stands on the defaults
    return l;
  }
  l.sms = sms, l.shared_per_block = block, l.shared_per_sm = sm;
  return l;
}

void copy(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  if (stream == nullptr) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  } else {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
  }
}

void hold(Stream stream, double microseconds) {
  hold_kernel<<<1, 1, 0, stream>>>((long long)(microseconds * 1e3));
  check_launch("hold");
}

template <typename T>
void launch_fill(T* dst, size_t count, T value, Stream stream) {
  if (count == 0) return;
  const int threads = 256;
  const int blocks = int(std::min<size_t>((count + threads - 1) / threads, 4096));
  fill_kernel<<<blocks, threads, 0, stream>>>(dst, count, value);
  check_launch("fill");
}

void fill(float* dst, size_t count, float value, Stream stream) {
  launch_fill(dst, count, value, stream);
}

void fill(uint16_t* dst, size_t count, uint16_t bits, Stream stream) {
  launch_fill(dst, count, bits, stream);
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw DeviceError(std::string("CUDA kernel ") + what +
                      " failed: " + cudaGetErrorString(status));
  }
}

Event create_event() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), "cudaEventCreate");
  return event;
}

void destroy_event(Event event) {
  if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void record(Event event, Stream stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), stream), "cudaEventRecord");
}

void wait(Stream stream, Event event) {
  check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent");
}

float elapsed_ms(Event start, Event stop) {
  float ms = 0.0f;
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)), "cudaEventSynchronize");
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)),
        "cudaEventElapsedTime");
  return ms;
}

void synchronize_event(Event event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

void begin_capture(Stream stream) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}

Graph end_capture(Stream stream) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  // Each kernel node keeps the priority of the stream it was captured from (CUDA copies it at
  // capture): the gradients' all-reduce on its high-priority stream (core/side_streams.h) stays
  // ahead of backward's kernels in a replay, as it is when launched call by call.
  const cudaError_t status =
      cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);
  check(status, "cudaGraphInstantiate");
  return exec;
}

void launch(Graph graph, Stream stream) {
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream), "cudaGraphLaunch");
}

void destroy_graph(Graph graph) {
  if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace crema::gpu
