// The CUDA runtime of a build without CUDA: no devices, and a clear message for every use.
#include "core/cuda_runtime.h"
#include "core/error.h"

namespace crema::gpu {
namespace {

[[noreturn]] void no_cuda() {
  throw Error(
      "this build of crema has no CUDA backend (nvcc was not found when it was built); "
      "use --device cpu or rebuild with the CUDA toolkit");
}

}  // namespace

bool built_with_cuda() {
  return false;
}
int device_count() {
  return 0;
}
std::string device_description(int) {
  no_cuda();
}
void use_device(int) {
  no_cuda();
}
int current_device() {
  no_cuda();
}
DeviceGuard::DeviceGuard(int) {}
DeviceGuard::~DeviceGuard() {}
Stream create_stream() {
  no_cuda();
}
void destroy_stream(Stream) {}
void synchronize(Stream) {
  no_cuda();
}
void* device_allocate(size_t) {
  no_cuda();
}
void device_free(void*) {}
void* pinned_allocate(size_t) {
  no_cuda();
}
void pinned_free(void*) {}
MemoryInfo memory_info() {
  no_cuda();
}
DeviceLimits device_limits() {
  return {};
}
void copy(void*, const void*, size_t, Stream) {
  no_cuda();
}
void hold(Stream, double) {
  no_cuda();
}
void fill(float*, size_t, float, Stream) {
  no_cuda();
}
void fill(uint16_t*, size_t, uint16_t, Stream) {
  no_cuda();
}
void check_launch(const char*) {}
Event create_event() {
  no_cuda();
}
void destroy_event(Event) {}
void record(Event, Stream) {
  no_cuda();
}
void wait(Stream, Event) {
  no_cuda();
}
float elapsed_ms(Event, Event) {
  no_cuda();
}
void synchronize_event(Event) {
  no_cuda();
}
void begin_capture(Stream) {
  no_cuda();
}
Graph end_capture(Stream) {
  no_cuda();
}
void launch(Graph, Stream) {
  no_cuda();
}
void destroy_graph(Graph) {}

}  // namespace crema::gpu
