// A CUDA driver-API tracer that the driver loads itself (CUDA_INJECTION64_PATH=its .so), for GPU
// machines without Nsight Systems: every driver call of every thread (crema's, and those of the
// libraries it loads, nvJPEG's included) is timed through CUPTI's callback API. Printed to stderr:
//   - each call longer than CUDA_API_TRACE_MS (default 5) as it ends: seconds since start, the
//     thread's name and id, the call, its milliseconds;
//   - at exit, per thread and call: count, total and longest milliseconds (totals >= 1 ms);
//     per thread name and call, how many went to the legacy stream (stream 0) and with which flags
//     streams were created; per kernel launched off the main thread, its stream, count and shape.
// Built by scripts/cupti_tools.sh (data/MEASUREMENTS.md has what it found).
#include <cupti.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Stats { long count = 0; double total_ms = 0, max_ms = 0; };
struct Launch { long count = 0; unsigned grid = 0, block = 0; };
std::mutex launches_mutex;
std::map<std::pair<std::string, long>, long>* streams = new std::map<std::pair<std::string, long>, long>;
std::map<std::pair<std::string, void*>, Launch>* launches = new std::map<std::pair<std::string, void*>, Launch>;

struct ThreadLog {
  std::string name;
  long tid = 0;
  std::map<uint32_t, Stats> calls;
  std::vector<std::chrono::steady_clock::time_point> entered;  // nesting depth
};

std::mutex registry_mutex;
std::vector<ThreadLog*>* registry = new std::vector<ThreadLog*>;  // leaked: read at exit
double threshold_ms = 5;
const auto t0 = std::chrono::steady_clock::now();

ThreadLog& this_thread_log() {
  thread_local ThreadLog* log = [] {
    auto* l = new ThreadLog;
    char name[32] = "?";
    pthread_getname_np(pthread_self(), name, sizeof name);
    l->name = name;
    l->tid = syscall(SYS_gettid);
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry->push_back(l);
    return l;
  }();
  return *log;
}

const char* name_of(uint32_t cbid) {
  const char* name = "?";
  cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
  return name;
}

void CUPTIAPI on_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  ThreadLog& log = this_thread_log();
  const auto now = std::chrono::steady_clock::now();
  if (info->callbackSite == CUPTI_API_ENTER) {
    log.entered.push_back(now);
    // Calls on the legacy stream (stream 0) and the flags of created streams, per thread name.
    const void* params = info->functionParams;
    long legacy = -1;
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        legacy = static_cast<const cuLaunchKernel_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
        legacy = static_cast<const cuMemcpyAsync_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
        legacy = static_cast<const cuMemcpyHtoDAsync_v2_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
        legacy = static_cast<const cuMemcpyDtoHAsync_v2_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
        legacy = static_cast<const cuMemcpyDtoDAsync_v2_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
        legacy = static_cast<const cuMemsetD8Async_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
        legacy = static_cast<const cuMemsetD32Async_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuEventRecord:
        legacy = static_cast<const cuEventRecord_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
        legacy = static_cast<const cuStreamWaitEvent_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        legacy = static_cast<const cuGraphLaunch_params*>(params)->hStream == nullptr; break;
      case CUPTI_DRIVER_TRACE_CBID_cuStreamCreate:
        legacy = 100 + static_cast<const cuStreamCreate_params*>(params)->Flags; break;
      case CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority:
        legacy = 100 + static_cast<const cuStreamCreateWithPriority_params*>(params)->flags; break;
      default: break;
    }
    if (legacy >= 0) {
      std::lock_guard<std::mutex> lock(launches_mutex);
      ++(*streams)[{log.name + " " + name_of(cbid), legacy}];
    }
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && log.name != "crema") {
      const auto* p = static_cast<const cuLaunchKernel_params*>(info->functionParams);
      std::lock_guard<std::mutex> lock(launches_mutex);
      Launch& l = (*launches)[{info->symbolName ? info->symbolName : "?", (void*)p->hStream}];
      ++l.count;
      l.grid = p->gridDimX * p->gridDimY * p->gridDimZ;
      l.block = p->blockDimX * p->blockDimY * p->blockDimZ;
    }
    return;
  }
  if (log.entered.empty()) return;
  const double ms = std::chrono::duration<double, std::milli>(now - log.entered.back()).count();
  log.entered.pop_back();
  Stats& s = log.calls[cbid];
  ++s.count;
  s.total_ms += ms;
  if (ms > s.max_ms) s.max_ms = ms;
  if (ms >= threshold_ms) {
    char name[32] = "?";
    pthread_getname_np(pthread_self(), name, sizeof name);
    const double at = std::chrono::duration<double>(now - t0).count();
    std::fprintf(stderr, "[trace] %9.3f s  %-15s %6ld %-40s %8.2f ms\n", at, name, log.tid,
                 name_of(cbid), ms);
  }
}

void report() {
  {
    std::lock_guard<std::mutex> lock(launches_mutex);
    for (const auto& [key, n] : *streams)
      std::fprintf(stderr, "[trace] stream %-50s %s %ld\n", key.first.c_str(),
                   key.second >= 100 ? ("flags " + std::to_string(key.second - 100)).c_str()
                   : key.second ? "LEGACY" : "own", n);
    for (const auto& [key, l] : *launches)
      std::fprintf(stderr, "[trace] launch %-60.60s stream %p count %ld grid %u block %u\n",
                   key.first.c_str(), key.second, l.count, l.grid, l.block);
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::fprintf(stderr, "[trace] per thread and driver call (count, total ms, max ms), total >= 1 ms:\n");
  for (ThreadLog* l : *registry)
    for (const auto& [cbid, s] : l->calls)
      if (s.total_ms >= 1)
        std::fprintf(stderr, "[trace]   %-15s %6ld %-40s %8ld %10.1f %8.2f\n", l->name.c_str(),
                     l->tid, name_of(cbid), s.count, s.total_ms, s.max_ms);
}

}  // namespace

extern "C" int InitializeInjection() {
  if (const char* t = std::getenv("CUDA_API_TRACE_MS")) threshold_ms = std::atof(t);
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, on_call, nullptr) != CUPTI_SUCCESS ||
      cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "[trace] CUPTI subscription failed\n");
    return 0;
  }
  std::atexit(report);
  std::fprintf(stderr, "[trace] CUPTI driver-API trace on, threshold %.1f ms\n", threshold_ms);
  return 1;
}
