// The CUDA runtime as crema uses it: devices, streams, memory and copies, behind an interface
// that includes no CUDA header (layers and apps include this freely). Implemented in
// cuda_runtime.cu when the build has CUDA, and in cuda_runtime_nocuda.cpp (every call says the
// build has no CUDA backend; device_count() is 0) when it has not.
//
// Failures throw crema::DeviceError with a message a user can act on: which device, how many
// bytes were asked for and how many are free, which kernel failed and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace crema::gpu {

using Stream = CUstream_st*;

// Whether this build has the CUDA backend, and how many devices the driver shows (0 without).
bool built_with_cuda();
int device_count();
// "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB".
std::string device_description(int index);
// Makes `index` the current device; DeviceError naming the devices present when it is absent.
void use_device(int index);
// The calling thread's current device.
int current_device();

// Makes device `index` the calling thread's current device while the guard lives, then restores
// the one before (CUDA's current device is a per-thread setting). Every Context operation and
// every kernel dispatch holds one, so Contexts on several GPUs can be used from any threads, each
// thread's own setting left as it was. A no-op in a build without CUDA.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // the device to restore; -1: it already was `index`
};

Stream create_stream();
void destroy_stream(Stream stream);
void synchronize(Stream stream);

// Device memory; allocate throws DeviceError "out of memory on cuda:0: asked for X, Y free of Z".
void* device_allocate(size_t bytes);
void device_free(void* ptr);
// Page-locked host memory (fast, asynchronous host<->device copies).
void* pinned_allocate(size_t bytes);
void pinned_free(void* ptr);
struct MemoryInfo {
  size_t free = 0, total = 0;
};
MemoryInfo memory_info();

// The current device's SMs and shared memory (a block's opt-in most, an SM's), for kernels'
// launch plans; an H100's or H200's where no device answers (a build without CUDA, a machine
// without a GPU: a plan made for another machine, such as a memory plan's workspace sizes).
struct DeviceLimits {
  int sms = 132, shared_per_block = 227 << 10, shared_per_sm = 228 << 10;
};
DeviceLimits device_limits();

// Copies `bytes` between any host or device addresses (unified addressing tells which), ordered
// on `stream`. With `stream` null the copy is synchronous.
void copy(void* dst, const void* src, size_t bytes, Stream stream);
// Keeps `stream` busy for about `microseconds` (one thread waiting on the GPU's timer): work
// queued behind it meanwhile then runs back to back, as fast as the GPU takes it, whatever the
// host's launch rate (apps/bench.cpp times short calls so).
void hold(Stream stream, double microseconds);
// dst[i] = value for i < count, on `stream`; the 16-bit form writes a bf16 or f16 bit pattern.
void fill(float* dst, size_t count, float value, Stream stream);
void fill(uint16_t* dst, size_t count, uint16_t bits, Stream stream);
// Throws DeviceError when the last kernel launch failed: "CUDA kernel <what> failed: <why>".
void check_launch(const char* what);

// Events: record on one stream, make another wait (the loader's copy stream and the compute
// stream), or time a span.
using Event = void*;
Event create_event();
void destroy_event(Event event);
void record(Event event, Stream stream);
void wait(Stream stream, Event event);
float elapsed_ms(Event start, Event stop);  // both recorded and complete
void synchronize_event(Event event);

// CUDA graphs: record the kernels queued on `stream` between begin_capture and end_capture (they
// do not run), then replay them with one launch. Small networks are launch-bound; this is how a
// static framework beats an eager one.
using Graph = void*;
void begin_capture(Stream stream);
Graph end_capture(Stream stream);  // the instantiated, launchable graph
void launch(Graph graph, Stream stream);
void destroy_graph(Graph graph);

}  // namespace crema::gpu
