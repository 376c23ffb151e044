// Algorithm selection for convolution: the parts that need no device (requests, the cache and its
// file). The heuristic and the measurement are in convolution_select_cuda.cu.
#include "kernels/convolution/convolution_select.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace crema::kernels {
namespace {

constexpr const char* kFileTag = "crema_algorithm_cache";
constexpr int kFileFormat = 1;

std::string device_name(const Context& ctx) {
  return ctx.device().is_cuda() ? gpu::device_description(ctx.device().index) : ctx.device().str();
}

// Throws crema::Error naming `where` unless `version` implements (pass, g).
void check_supported(cuda::ConvVersion version, cuda::ConvPass pass, const Conv2dGeometry& g,
                     const std::string& where) {
  if (cuda::supports(version, pass, g)) return;
  std::string usable;
  for (cuda::ConvVersion v : cuda::conv_versions()) {
    if (cuda::supports(v, pass, g)) {
      usable += std::string(usable.empty() ? "" : ", ") + cuda::conv_version_name(v);
    }
  }
  throw Error(where + ": " + cuda::conv_version_name(version) + " does not implement " +
              cuda::conv_pass_name(pass) + " for this geometry (" +
              conv_algorithm_cache_key(pass, g, "", std::numeric_limits<size_t>::max()) +
              "); usable: " + usable + ", or auto, or find");
}

}  // namespace

std::string ConvAlgorithmRequest::str() const {
  switch (mode) {
    case Mode::heuristic:
      return "auto";
    case Mode::measure:
      return "find";
    case Mode::pinned:
      return cuda::conv_version_name(version);
  }
  return "?";
}

std::optional<ConvAlgorithmRequest> parse_conv_algorithm(const std::string& text) {
  ConvAlgorithmRequest request;
  if (text == "auto") return request;
  if (text == "find") {
    request.mode = ConvAlgorithmRequest::Mode::measure;
    return request;
  }
  const std::optional<cuda::ConvVersion> version = cuda::conv_version_from_name(text);
  if (!version) return std::nullopt;
  request.mode = ConvAlgorithmRequest::Mode::pinned;
  request.version = *version;
  return request;
}

std::string conv_algorithm_spellings() {
  std::string text = "auto, find";
  for (cuda::ConvVersion v : cuda::conv_versions())
    text += std::string(", ") + cuda::conv_version_name(v);
  return text;
}

const char* conv_algorithm_status_name(ConvAlgorithmStatus status) {
  switch (status) {
    case ConvAlgorithmStatus::ok:
      return "ok";
    case ConvAlgorithmStatus::over_workspace_limit:
      return "over workspace limit";
    case ConvAlgorithmStatus::mismatch:
      return "mismatch";
  }
  return "?";
}

double conv_find_tolerance(cuda::GemmMath math) {
  switch (math) {
    case cuda::GemmMath::fp32:
      break;
    case cuda::GemmMath::tf32:
      return 2e-3;
    case cuda::GemmMath::bf16:
      return 1e-2;
  }
  return kConvFindTolerance;
}

std::string conv_algorithm_cache_key(cuda::ConvPass pass, const Conv2dGeometry& g,
                                     const std::string& device, size_t workspace_limit_bytes,
                                     cuda::GemmMath math) {
  std::ostringstream key;
  key << "conv2d " << cuda::conv_pass_name(pass) << " N" << g.N << " C" << g.C << " H" << g.H
      << " W" << g.W << " K" << g.K << " R" << g.R << " S" << g.S << " pad" << g.pad_h << "x"
      << g.pad_w << " stride" << g.stride_h << "x" << g.stride_w << " dilation" << g.dilation_h
      << "x" << g.dilation_w << " groups" << g.groups;
  if (math != cuda::GemmMath::fp32) key << " math " << cuda::gemm_math_name(math);
  if (!device.empty()) {
    key << " ws<=";
    if (workspace_limit_bytes == std::numeric_limits<size_t>::max()) {
      key << "any";
    } else {
      key << workspace_limit_bytes;
    }
    key << " on " << device;
  }
  return key.str();
}

cuda::ConvVersion find_conv_algorithm_cached(Context& ctx, cuda::ConvPass pass,
                                             const Conv2dGeometry& g, size_t workspace_limit_bytes,
                                             cuda::GemmMath math) {
  const std::string key =
      conv_algorithm_cache_key(pass, g, device_name(ctx), workspace_limit_bytes, math);
  std::map<std::string, std::string>& cache = ctx.algorithm_cache();
  if (auto it = cache.find(key); it != cache.end()) {
    const std::optional<cuda::ConvVersion> cached = cuda::conv_version_from_name(it->second);
    if (cached && cuda::supports(*cached, pass, g)) return *cached;
  }
  const std::vector<ConvAlgorithmPerf> results =
      find_conv_algorithms(ctx, pass, g, workspace_limit_bytes, math);
  // Sorted, ok first; the heuristic version always checks against itself, so unless it is over
  // the limit there is an ok result.
  if (results.empty() || results.front().status != ConvAlgorithmStatus::ok) {
    throw Error(key + ": no version fits a workspace of " + std::to_string(workspace_limit_bytes) +
                " bytes");
  }
  cache[key] = cuda::conv_version_name(results.front().version);
  return results.front().version;
}

cuda::ConvVersion choose_conv_algorithm(Context& ctx, cuda::ConvPass pass, const Conv2dGeometry& g,
                                        const ConvAlgorithmRequest& request,
                                        size_t workspace_limit_bytes, const std::string& where,
                                        cuda::GemmMath math) {
  switch (request.mode) {
    case ConvAlgorithmRequest::Mode::pinned:
      check_supported(request.version, pass, g, where);
      return request.version;
    case ConvAlgorithmRequest::Mode::measure:
      return find_conv_algorithm_cached(ctx, pass, g, workspace_limit_bytes, math);
    case ConvAlgorithmRequest::Mode::heuristic:
      break;
  }
  return get_conv_algorithm(pass, g, math);
}

void load_algorithm_cache(const std::string& path, std::map<std::string, std::string>& cache) {
  std::ifstream in(path);
  if (!in) return;
  nlohmann::json file;
  try {
    in >> file;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a JSON algorithm cache (" + e.what() + ")");
  }
  if (!file.is_object() || file.value(kFileTag, 0) != kFileFormat || !file.contains("entries") ||
      !file["entries"].is_object()) {
    throw Error(path + ": not a crema algorithm cache (expected {\"" + kFileTag +
                "\": " + std::to_string(kFileFormat) + ", \"entries\": {...}})");
  }
  for (const auto& [key, value] : file["entries"].items()) {
    if (!value.is_string()) {
      throw Error(path + ": entry '" + key + "' must be an algorithm name (a string)");
    }
    cache[key] = value.get<std::string>();
  }
}

void save_algorithm_cache(const std::string& path,
                          const std::map<std::string, std::string>& cache) {
  nlohmann::json file;
  file[kFileTag] = kFileFormat;
  file["entries"] = nlohmann::json::object();
  for (const auto& [key, value] : cache) file["entries"][key] = value;
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << file.dump(1) << "\n";
    if (!out) throw Error(path + ": cannot write the algorithm cache (" + temporary + ")");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Error(path + ": cannot write the algorithm cache (rename from " + temporary + " failed)");
  }
}

}  // namespace crema::kernels
