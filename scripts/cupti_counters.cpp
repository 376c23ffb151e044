// Per-kernel hardware counters without Nsight Compute, for the GPU machines: a library the CUDA
// driver loads itself (CUDA_INJECTION64_PATH) that measures ncu's metrics for every kernel through
// CUPTI's Range Profiler (auto range: a range per kernel; kernel replay: each kernel replayed
// within its launch for as many passes as the metrics need; the clocks are left alone).
// Environment:
//   CUPTI_COUNTERS_METRICS  ncu's metric names, comma-separated (default gpu__time_duration.sum)
//   CUPTI_COUNTERS_OUT      the CSV file (stderr when unset): rows of `ncu --csv --print-units base
//                           --print-kernel-base function`, "ID","Kernel Name","Metric Name","Metric
//                           Value" (ID: the kernel's index in launch order from 0; times in ns)
//   CUPTI_COUNTERS_RANGES   kernels a counter-data image holds (default 100): decoded that often,
//                           and at context destruction and exit
// A failed CUPTI call is said once on stderr, and the program goes on unprofiled. Built by
// scripts/cupti_tools.sh; CUPTI loads libnvperf_host.so and libnvperf_target.so (LD_LIBRARY_PATH).
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ---- settings, read once in InitializeInjection; the output (under state_mutex) ---------------
std::vector<std::string>* requested = new std::vector<std::string>;  // leaked: used at exit
size_t ranges_per_image = 100;
FILE* out = stderr;
bool header_written = false;

// ---- errors: each failing call named once ------------------------------------------------------
std::mutex report_mutex;
std::set<std::string>* reported = new std::set<std::string>;

void report_once(const std::string& key, const std::string& message) {
  std::lock_guard<std::mutex> lock(report_mutex);
  if (reported->insert(key).second) std::fprintf(stderr, "[counters] %s\n", message.c_str());
}

// True when `result` is success; otherwise reports `call` (once) and returns false.
bool ok(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = "?";
  cuptiGetResultString(result, &text);
  std::string message =
      std::string(call) + " failed: " + text + " (" + std::to_string(int(result)) + ")";
  if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    message += "; counters need root or the driver's RmProfilingAdminOnly=0";
  report_once(call, message);
  return false;
}

// ncu's --print-kernel-base function: "void ns::gemm<128, 8>(float const*, int)" -> "gemm".
std::string function_name(const char* symbol) {
  if (symbol == nullptr) return "?";
  std::string name = symbol;
  int status = 0;
  if (char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status)) {
    name = demangled;
    std::free(demangled);
  }
  // Drops a trailing bracketed group, "(...)" or "<...>", nested ones included.
  auto drop_tail = [&name](char open, char close) {
    if (name.empty() || name.back() != close) return;
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == close) ++depth;
      if (name[i] == open && --depth == 0) {
        name.erase(i);
        return;
      }
    }
  };
  drop_tail('(', ')');
  drop_tail('<', '>');
  const size_t scope = name.rfind("::"), space = name.rfind(' ');
  size_t start = 0;
  if (scope != std::string::npos) start = scope + 2;
  if (space != std::string::npos && space + 1 > start) start = space + 1;
  return start < name.size() ? name.substr(start) : std::string(symbol);
}

// ---- one profiled context ------------------------------------------------------------------
struct Launch {
  uint32_t correlation;  // CUPTI's id of the launch call
  std::string name;
};

struct Profiler {
  CUcontext ctx = nullptr;
  bool broken = false;   // a call failed: its kernels run unprofiled from then on
  bool running = false;  // between cuptiRangeProfilerStart and Stop
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* object = nullptr;
  std::vector<const char*> metrics;  // those the chip accepted, into `requested`
  std::vector<uint8_t> config, counter_data;
  std::vector<Launch> launches;  // since the last Start, in launch order: range i is launches[i]
};

std::mutex state_mutex;  // guards everything below and every Profiler
std::map<CUcontext, Profiler*>* profilers = new std::map<CUcontext, Profiler*>;
long next_id = 0;

bool start(Profiler& p) {
  CUpti_RangeProfiler_Start_Params params = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  params.pRangeProfilerObject = p.object;
  p.running = ok(cuptiRangeProfilerStart(&params), "cuptiRangeProfilerStart");
  return p.running;
}

bool set_config(Profiler& p) {
  CUpti_RangeProfiler_SetConfig_Params params = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  params.pRangeProfilerObject = p.object;
  params.configSize = p.config.size();
  params.pConfig = p.config.data();
  params.counterDataImageSize = p.counter_data.size();
  params.pCounterDataImage = p.counter_data.data();
  params.range = CUPTI_AutoRange;
  params.replayMode = CUPTI_KernelReplay;
  params.maxRangesPerPass = ranges_per_image;
  params.numNestingLevels = 1;  // auto range: 1
  params.minNestingLevel = 1;
  params.passIndex = 0;
  params.targetNestingLevel = 1;
  return ok(cuptiRangeProfilerSetConfig(&params), "cuptiRangeProfilerSetConfig");
}

bool initialize_counter_data(Profiler& p) {
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params params = {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  params.pRangeProfilerObject = p.object;
  params.counterDataSize = p.counter_data.size();
  params.pCounterData = p.counter_data.data();
  return ok(cuptiRangeProfilerCounterDataImageInitialize(&params),
            "cuptiRangeProfilerCounterDataImageInitialize");
}

// Host side only (no GPU needed): the host object for `chip`, the metrics it accepts, the config
// image that schedules them and its number of passes.
bool build_config(Profiler& p, const char* chip, const uint8_t* availability, size_t* passes_out) {
  CUpti_Profiler_Host_Initialize_Params host = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  host.pChipName = chip;
  host.pCounterAvailabilityImage = availability;
  if (!ok(cuptiProfilerHostInitialize(&host), "cuptiProfilerHostInitialize")) return false;
  p.host = host.pHostObject;

  // One metric at a time, so that an unknown name is reported by name and the others still count.
  for (const std::string& name : *requested) {
    const char* metric = name.c_str();
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = p.host;
    add.ppMetricNames = &metric;
    add.numMetrics = 1;
    const CUptiResult result = cuptiProfilerHostConfigAddMetrics(&add);
    if (result == CUPTI_SUCCESS) {
      p.metrics.push_back(metric);
    } else {
      const char* text = "?";
      cuptiGetResultString(result, &text);
      report_once("metric " + name, "metric " + name + " not measured on " + chip + ": " + text);
    }
  }
  if (p.metrics.empty()) {
    report_once("no metrics", "none of CUPTI_COUNTERS_METRICS can be measured: no counters");
    return false;
  }
  CUpti_Profiler_Host_GetConfigImageSize_Params size = {
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  size.pHostObject = p.host;
  if (!ok(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize"))
    return false;
  p.config.resize(size.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params image = {
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  image.pHostObject = p.host;
  image.configImageSize = p.config.size();
  image.pConfigImage = p.config.data();
  if (!ok(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage")) return false;
  CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  passes.configImageSize = p.config.size();
  passes.pConfigImage = p.config.data();
  *passes_out = ok(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses")
                    ? passes.numOfPasses
                    : 0;
  return true;
}

// The host object and config image (build_config), the range profiler on the context, its
// counter-data image and configuration, and the first Start. At the context's first launch.
bool set_up(Profiler& p) {
  static bool initialized = false;  // under state_mutex
  if (!initialized) {
    CUpti_Profiler_Initialize_Params params = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    if (!ok(cuptiProfilerInitialize(&params), "cuptiProfilerInitialize")) return false;
    initialized = true;
  }
  uint32_t device = 0;
  if (!ok(cuptiGetDeviceId(p.ctx, &device), "cuptiGetDeviceId")) return false;
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = device;
  if (!ok(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName")) return false;

  // Which counters this context can read (before the range profiler is enabled on it).
  std::vector<uint8_t> availability;
  CUpti_Profiler_GetCounterAvailability_Params avail = {
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = p.ctx;
  if (ok(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability")) {
    availability.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    if (!ok(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability"))
      availability.clear();
  }

  size_t passes = 0;
  if (!build_config(p, chip.pChipName, availability.empty() ? nullptr : availability.data(),
                    &passes))
    return false;
  std::fprintf(stderr, "[counters] %s, device %u: %zu metrics, %zu passes per kernel\n",
               chip.pChipName, device, p.metrics.size(), passes);

  CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  enable.ctx = p.ctx;
  if (!ok(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable")) return false;
  p.object = enable.pRangeProfilerObject;

  CUpti_RangeProfiler_GetCounterDataSize_Params data = {
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  data.pRangeProfilerObject = p.object;
  data.pMetricNames = p.metrics.data();
  data.numMetrics = p.metrics.size();
  data.maxNumOfRanges = ranges_per_image;
  data.maxNumRangeTreeNodes = uint32_t(ranges_per_image);
  if (!ok(cuptiRangeProfilerGetCounterDataSize(&data), "cuptiRangeProfilerGetCounterDataSize"))
    return false;
  p.counter_data.resize(data.counterDataSize);
  return initialize_counter_data(p) && set_config(p) && start(p);
}

// A value as ncu prints it with base units, less the thousands separators.
std::string format_value(double v) {
  char text[64];
  const bool whole = std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15;
  std::snprintf(text, sizeof text, whole ? "%.0f" : "%.9g", v);
  return text;
}

std::string quoted(const std::string& s) {  // a CSV field, its quotes doubled
  std::string q = "\"";
  for (char c : s) q.append(c == '"' ? 2 : 1, c);
  return q + "\"";
}

// Stops the profiler, decodes the counters of the kernels since Start and writes their rows.
void flush(Profiler& p) {
  if (!p.running) return;
  p.running = false;
  CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  stop.pRangeProfilerObject = p.object;
  CUpti_RangeProfiler_DecodeData_Params decode = {
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  decode.pRangeProfilerObject = p.object;
  if (!ok(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop") ||
      !ok(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData")) {
    p.broken = true;
    return;
  }
  if (decode.numOfRangeDropped > 0)
    report_once("dropped", std::to_string(decode.numOfRangeDropped) +
                               " kernels dropped: lower CUPTI_COUNTERS_RANGES");
  CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = p.counter_data.data();
  info.counterDataImageSize = p.counter_data.size();
  if (!ok(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo")) {
    p.broken = true;
    return;
  }
  if (info.numTotalRanges != p.launches.size())
    report_once("mismatch", std::to_string(p.launches.size()) + " launches, " +
                                std::to_string(info.numTotalRanges) +
                                " ranges: kernel names may be off (CUDA graphs?)");
  std::vector<double> values(p.metrics.size());
  for (size_t range = 0; range < info.numTotalRanges; ++range) {
    const long id = next_id++;
    CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    eval.pHostObject = p.host;
    eval.pCounterDataImage = p.counter_data.data();
    eval.counterDataImageSize = p.counter_data.size();
    eval.rangeIndex = range;
    eval.ppMetricNames = p.metrics.data();
    eval.numMetrics = p.metrics.size();
    eval.pMetricValues = values.data();
    if (!ok(cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues"))
      continue;
    const std::string kernel = range < p.launches.size() ? p.launches[range].name : "?";
    if (!header_written) {
      std::fprintf(out, "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Value\"\n");
      header_written = true;
    }
    for (size_t m = 0; m < p.metrics.size(); ++m)
      std::fprintf(out, "\"%ld\",%s,%s,\"%s\"\n", id, quoted(kernel).c_str(),
                   quoted(p.metrics[m]).c_str(), format_value(values[m]).c_str());
  }
  std::fflush(out);
  p.launches.clear();
}

// After a flush: an empty counter-data image and a new Start (with the configuration set again
// if a bare Start is refused).
void restart(Profiler& p) {
  if (p.broken || !initialize_counter_data(p)) {
    p.broken = true;
    return;
  }
  CUpti_RangeProfiler_Start_Params params = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  params.pRangeProfilerObject = p.object;
  p.running = cuptiRangeProfilerStart(&params) == CUPTI_SUCCESS || (set_config(p) && start(p));
  if (!p.running) p.broken = true;
}

// ---- callbacks -------------------------------------------------------------------------------
bool is_launch(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return true;
    default:
      return false;
  }
}

// Names are recorded at a launch's entry: with several threads launching at once on one context,
// two kernels may swap names (auto range serializes the kernels, not the calls' entries).
void on_launch_enter(const CUpti_CallbackData& info) {
  std::lock_guard<std::mutex> lock(state_mutex);
  Profiler*& p = (*profilers)[info.context];
  if (p == nullptr) {
    p = new Profiler;
    p->ctx = info.context;
    if (!set_up(*p)) p->broken = true;
  }
  if (p->broken) return;
  if (p->launches.size() >= ranges_per_image) {  // the image is full: decode it, start anew
    flush(*p);
    restart(*p);
    if (p->broken) return;
  }
  p->launches.push_back({info.correlationId, function_name(info.symbolName)});
}

void on_launch_exit(const CUpti_CallbackData& info) {
  const auto* result = static_cast<const CUresult*>(info.functionReturnValue);
  if (result != nullptr && *result != CUDA_SUCCESS) {  // no kernel ran, so no range
    std::lock_guard<std::mutex> lock(state_mutex);
    auto it = profilers->find(info.context);
    if (it != profilers->end()) {
      std::vector<Launch>& launches = it->second->launches;
      for (size_t i = launches.size(); i-- > 0;)
        if (launches[i].correlation == info.correlationId) {
          launches.erase(launches.begin() + long(i));
          break;
        }
    }
  }
}

// Before a context goes: its last kernels' counters, then the profiler and host objects.
void on_context_destroy(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(state_mutex);
  auto it = profilers->find(ctx);
  if (it == profilers->end()) return;
  Profiler& p = *it->second;
  if (!p.broken) flush(p);
  if (p.object != nullptr) {
    CUpti_RangeProfiler_Disable_Params params = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    params.pRangeProfilerObject = p.object;
    ok(cuptiRangeProfilerDisable(&params), "cuptiRangeProfilerDisable");
  }
  if (p.host != nullptr) {
    CUpti_Profiler_Host_Deinitialize_Params params = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    params.pHostObject = p.host;
    ok(cuptiProfilerHostDeinitialize(&params), "cuptiProfilerHostDeinitialize");
  }
  delete it->second;
  profilers->erase(it);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  thread_local bool inside = false;  // CUPTI's own driver calls must not come back in here
  if (inside) return;
  inside = true;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    on_context_destroy(static_cast<const CUpti_ResourceData*>(data)->context);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && is_launch(cbid)) {
    const auto& info = *static_cast<const CUpti_CallbackData*>(data);
    if (info.context != nullptr) {
      (info.callbackSite == CUPTI_API_ENTER ? on_launch_enter : on_launch_exit)(info);
    }
  }
  inside = false;
}

// At exit, the kernels of contexts still alive since their last decode (with each context made
// current, as the thread that exits may not have it).
void at_exit() {
  std::lock_guard<std::mutex> lock(state_mutex);
  for (auto& entry : *profilers) {
    Profiler& p = *entry.second;
    if (p.broken || !p.running) continue;
    if (cuCtxPushCurrent(p.ctx) != CUDA_SUCCESS) {
      report_once("exit", std::to_string(p.launches.size()) +
                              " kernels not measured: their context was gone at exit");
      continue;
    }
    flush(p);
    CUcontext popped;
    cuCtxPopCurrent(&popped);
  }
  if (out != stderr) std::fclose(out);
  out = stderr;
}

}  // namespace

// Returns 1 even where it declines to profile (said on stderr): the program must run regardless.
extern "C" int InitializeInjection() {
  static bool called = false;
  if (called) return 1;
  called = true;
  const char* list = std::getenv("CUPTI_COUNTERS_METRICS");
  std::istringstream metrics(list != nullptr && *list != '\0' ? list : "gpu__time_duration.sum");
  for (std::string name; std::getline(metrics, name, ',');) {
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) requested->push_back(name);
  }
  if (const char* n = std::getenv("CUPTI_COUNTERS_RANGES")) {
    if (std::atol(n) < 1)
      std::fprintf(stderr, "[counters] CUPTI_COUNTERS_RANGES=%s: not >= 1\n", n);
    ranges_per_image = std::atol(n) > 0 ? size_t(std::atol(n)) : ranges_per_image;
  }
  // CUPTI loads these itself when profiling starts; without them no kernel would be measured.
  for (const char* lib : {"libnvperf_host.so", "libnvperf_target.so"})
    if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr,
                   "[counters] %s not found (%s): put torch's nvidia/cu13/lib (or the "
                   "CUPTI wheel's lib) on LD_LIBRARY_PATH; no counters\n",
                   lib, dlerror());
      return 1;
    }
  if (const char* path = std::getenv("CUPTI_COUNTERS_OUT"); path != nullptr && *path != '\0') {
    out = std::fopen(path, "w");
    if (out == nullptr) {
      std::fprintf(stderr, "[counters] cannot write %s (%s); rows go to stderr\n", path,
                   std::strerror(errno));
      out = stderr;
    }
  }
  CUpti_SubscriberHandle subscriber;
  if (!ok(cuptiSubscribe(&subscriber, on_callback, nullptr), "cuptiSubscribe")) return 1;
  bool enabled = ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
                    "cuptiEnableCallback");
  for (CUpti_CallbackId cbid = 0; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid)
    if (is_launch(cbid))
      enabled = enabled && ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid),
                              "cuptiEnableCallback");
  if (!enabled) {
    cuptiUnsubscribe(subscriber);
    return 1;
  }
  std::atexit(at_exit);
  std::fprintf(stderr, "[counters] on: %zu metrics, decoded every %zu kernels\n", requested->size(),
               ranges_per_image);
  return 1;
}
