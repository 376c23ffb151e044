#include "apps/distributed/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::distributed {
namespace {

std::vector<std::string> candidates(const char* explicit_path) {
  if (explicit_path != nullptr && *explicit_path != '\0') return {explicit_path};
  return {"libnccl.so.2", "libnccl.so"};
}

template <typename F>
void bind(void* handle, const std::string& path, const char* name, F& slot) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    throw Error(fmt::format("{} is not an NCCL 2 library: it has no {}", path, name));
  }
  slot = reinterpret_cast<F>(symbol);
}

NcclLibrary load() {
  const char* explicit_path = std::getenv("CREMA_NCCL_LIBRARY");
  std::string tried;
  for (const std::string& path : candidates(explicit_path)) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : "; ", path, why ? why : "not found");
      continue;
    }
    NcclLibrary lib;
    lib.path = path;
    bind(handle, path, "ncclGetVersion", lib.get_version);
    bind(handle, path, "ncclGetUniqueId", lib.get_unique_id);
    bind(handle, path, "ncclCommInitRank", lib.comm_init_rank);
    bind(handle, path, "ncclAllReduce", lib.all_reduce);
    bind(handle, path, "ncclBroadcast", lib.broadcast);
    bind(handle, path, "ncclCommAbort", lib.comm_abort);
    bind(handle, path, "ncclCommDestroy", lib.comm_destroy);
    bind(handle, path, "ncclCommGetAsyncError", lib.comm_get_async_error);
    bind(handle, path, "ncclGetErrorString", lib.get_error_string);
    lib.check(lib.get_version(&lib.version), "ncclGetVersion");
    return lib;  // the handle stays open for the process's life
  }
  throw Error(fmt::format(
      "training on several GPUs needs NCCL, which could not be loaded: tried {}; set "
      "CREMA_NCCL_LIBRARY to the path of libnccl.so.2 (the CUDA toolkit's lib64, or PyTorch's "
      "site-packages/nvidia/nccl/lib) or add its folder to LD_LIBRARY_PATH",
      tried));
}

}  // namespace

void NcclLibrary::check(int result, const char* call) const {
  if (result == kNcclSuccess) return;
  throw Error(fmt::format("NCCL {} failed: {} (NCCL {}, {}; NCCL_DEBUG=INFO says more)", call,
                          get_error_string(result), version, path));
}

const NcclLibrary& nccl_library() {
  static std::mutex mutex;
  static std::unique_ptr<NcclLibrary> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) loaded = std::make_unique<NcclLibrary>(load());
  return *loaded;
}

}  // namespace crema::distributed
