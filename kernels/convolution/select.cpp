// Algorithm selection for convolution: requests, the heuristic (get) and its workspace fallback,
// the one selection door, and the cache and its file. The measurement (find) is in
// select_find.cpp.
#include "kernels/convolution/select.h"

#include <algorithm>
#include <cstdint>
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

// The production record called `name` (a build without CUDA has none: it says so).
const ConvAlgorithm& production(const char* name) {
  const ConvAlgorithm* algorithm = conv_algorithm_named(name);
  if (algorithm == nullptr) {
    throw Error(std::string("convolution: no algorithm '") + name + "' in this build" +
                (kBuiltWithCuda ? "" : " (it has no CUDA backend)"));
  }
  return *algorithm;
}

// 32-bit indexing: every kernel indexes its tensors with int.
void check_sizes(const std::string& where, const Conv2dGeometry& g) {
  const int64_t largest = std::max(
      {g.N * g.C * g.H * g.W, g.N * g.K * g.P() * g.Q(), g.K * (g.C / g.groups) * g.R * g.S});
  if (largest >= INT32_MAX) {
    throw Error(where + ": conv2d on CUDA: tensors of 2^31 elements or more are not supported " +
                "(the largest here has " + std::to_string(largest) + "); use a smaller batch");
  }
}

// ---- The heuristic (get) --------------------------------------------------------------------
// The algorithms production uses per pass, from the geometry and math alone (MEASUREMENTS.md has
// the measurements behind each rule).

// Winograd F(4x4,3x3) where it was measured to win (H200, MEASUREMENTS.md: ResNet's 3x3 layers with
// 64 to 256 channels, every pass 2.4-3.9x faster than v2): 3x3 stride-1 geometries whose groups
// have at least 32 input and output channels (the batched GEMMs' inner dimension and rows).
bool winograd_pays(ConvPass pass, const Conv2dGeometry& g) {
  return production("winograd_4x4").supports(pass, g) && g.C / g.groups >= 32 &&
         g.K / g.groups >= 32;
}

// FFT (v10) in fp32 (H200, MEASUREMENTS.md "FFT"): 5x5 and larger filters with at least 64 input
// and output channels on padded maps of 32 x 32 or less, where its per-bin products do 9-15x fewer
// operations than the direct sum: every pass 0.27-0.76x the best other version on five such
// layers. Not at F = 64 (a 32x32 map with pad 3: 1.2-1.3x behind v9), nor with few channels
// (LeNet's 20 -> 50: 1.35-2.7x), nor on 3x3 filters (Winograd F(4x4,3x3): 2.1-4.1x faster).
bool fft_pays(const Conv2dGeometry& g) {
  return production("fft").supports(ConvPass::forward, g) && g.R >= 5 && g.S >= 5 && g.C >= 64 &&
         g.K >= 64 && g.H + 2 * g.pad_h <= 32 && g.W + 2 * g.pad_w <= 32;
}

// The Winograd version of a 3x3 stride-1 layer in tf32 / bf16 (H200, MEASUREMENTS.md "The heuristic
// in tf32 and bf16"): forward and backward data run v5 on tensor cores from 256 channels a group
// (its 16 GEMMs are then large enough that the tensor cores beat v6's 4x fewer FFMA multiplies:
// 0.12 against 0.13 ms at 256 channels 8x8, 0.11 against 0.16 ms at 512 4x4), v6 in fp32 below
// (0.155 against v5's 0.263 ms at 64 channels 32x32); the filter gradient v6 (fp32) at every
// size measured (its F(3x3,2x2) in v5 pays the transforms of x and dy at full resolution).
const char* tensor_winograd(ConvPass pass, const Conv2dGeometry& g) {
  const bool wide = std::min(g.C, g.K) / g.groups >= 256;
  return pass != ConvPass::backward_filter && wide ? "winograd_2x2" : "winograd_4x4";
}

// ---- fp32 (FFMA), from the broad suite ----------------------------------------------------
// scripts/bench/conv_suite.txt (66 public training convolutions x 3 passes), H200, 2026-11-27:
// these rules pick within 10% of the fastest version on 189 of the 198 passes (auto / best
// geometric mean 1.012; the rules before them 158 and 1.132). MEASUREMENTS.md, "The fp32
// heuristic on the broad suite", has the table behind each rule.

// Grouped layers of few channels a group (ResNeXt's 32 groups of 4 or 8): the direct loops,
// 4.7-10x faster than the implicit GEMMs, whose tiles a 4-channel group leaves mostly empty.
bool few_channels_a_group(const Conv2dGeometry& g) {
  return g.groups > 1 && !g.depthwise() && g.C / g.groups <= 8;
}

// Grouped layers of 16 channels a group or more (AlexNet's two groups): v9 (NHWC) in every pass.
bool wide_groups(const Conv2dGeometry& g) {
  return g.groups > 1 && !g.depthwise() && g.C / g.groups >= 16;
}

// im2col + GEMM where its workspace (the column buffer, C/G R S x N P Q floats, and the GEMM's)
// stays within 1 GiB: ResNet's stem at batch 64 takes 0.7 GB for backward data, the speech front
// end's 21x11 filters would want 1.5 GB at batch 8. (The workspace is one buffer the layers share;
// model.workspace_limit caps it.)
bool im2col_fits(ConvPass pass, const Conv2dGeometry& g) {
  const ConvAlgorithm& im2col = production("im2col_gemm");
  return im2col.supports(pass, g) &&
         conv_algorithm_workspace_bytes(im2col, pass, g) <= (size_t(1) << 30);
}

// F(4x4,3x3) unless its tiles (N ceil(P/4) ceil(Q/4): the rows of its 36 batched GEMMs) number
// 256 or fewer, too few to fill the GPU, where F(2x2,3x3)'s 2.25x as many tiles win: 14 x 14 maps
// at batch 16 (1.05-1.15x), 7 x 7 at 512 channels (1.7x). At batch 64 the same 14 x 14 layer has
// 1024 tiles and F(4x4) is 1.18x faster (the table in README.md).
const char* fp32_winograd(ConvPass pass, const Conv2dGeometry& g) {
  const int64_t tiles = g.N * ((g.P() + 3) / 4) * ((g.Q() + 3) / 4);
  if (tiles > 256) return "winograd_4x4";
  return production("winograd_2x2").supports(pass, g) ? "winograd_2x2" : "winograd_4x4";
}

// `name` where it implements the pass, else `otherwise`.
const char* if_supported(const char* name, ConvPass pass, const Conv2dGeometry& g,
                         const char* otherwise) {
  return production(name).supports(pass, g) ? name : otherwise;
}

const char* fp32_rule(ConvPass pass, const Conv2dGeometry& g) {
  const bool few_outputs = g.P() * g.Q() <= 7 * 7;  // the GEMMs' N P Q side is short
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  switch (pass) {
    case ConvPass::forward:
      if (few_channels_a_group(g)) return if_supported("direct", pass, g, "implicit_gemm");
      if (fft_pays(g)) return "fft";
      if (winograd_pays(pass, g)) return fp32_winograd(pass, g);
      if (wide_groups(g)) return if_supported("nhwc_implicit_gemm", pass, g, "implicit_gemm");
      // A short N P Q side, or a strided layer of many channels: one large GEMM (1.2-1.3x).
      if (im2col_fits(pass, g) && (few_outputs || (strided && g.C / g.groups >= 128))) {
        return "im2col_gemm";
      }
      return "implicit_gemm";
    case ConvPass::backward_data:
      if (few_channels_a_group(g)) return if_supported("direct", pass, g, "implicit_gemm");
      // FFT 2-3x faster than im2col on 5x5 and 7x7 layers of 128 channels (MEASUREMENTS.md,
      // "FFT"), 1.24x slower on AlexNet's 5x5 64 -> 192 (27 x 27): kept.
      if (fft_pays(g)) return "fft";
      if (winograd_pays(pass, g)) return fp32_winograd(pass, g);
      // col2im after one GEMM beats the implicit GEMM's gather almost everywhere: strided
      // layers 1.6-4.5x (the gather reads mostly zeros), 5x5 filters 1.4-4.6x.
      if (im2col_fits(pass, g)) return "im2col_gemm";
      if (g.C / g.groups <= 32 && production("direct").supports(pass, g)) return "direct";
      return if_supported("nhwc_implicit_gemm", pass, g, "implicit_gemm");
    case ConvPass::backward_filter:
      break;
  }
  if (fft_pays(g)) return "fft";
  // F(4x4,3x3) also for grouped 3x3 layers of few channels a group (1.32x on ResNeXt's).
  if (winograd_pays(pass, g) ||
      (g.groups > 1 && production("winograd_4x4").supports(pass, g))) {
    return "winograd_4x4";
  }
  if (wide_groups(g)) return if_supported("nhwc_implicit_gemm", pass, g, "implicit_gemm");
  if (few_outputs && im2col_fits(pass, g)) return "im2col_gemm";  // 7x7 maps: 1.15-1.63x
  return "implicit_gemm";
}

// ---- tf32 and bf16 (tensor cores) -------------------------------------------------------------

const char* forward_rule(const Conv2dGeometry& g, cuda::GemmMath math) {
  if (g.depthwise()) return "depthwise_direct";
  if (g.pointwise()) return "pointwise_gemm";
  if (math == cuda::GemmMath::fp32) return fp32_rule(ConvPass::forward, g);
  if (winograd_pays(ConvPass::forward, g)) return tensor_winograd(ConvPass::forward, g);
  // Tensor cores: v9's cp.async pipeline from 16 channels a group (3x3 stride 2: 0.09-0.13 ms
  // against v2's 0.15-0.26), v2 for 1x1 filters (its patch loader is then a strided copy: 0.03
  // ms against v9's 0.05-0.07, whose transposes cost more than the GEMM) and few channels (a
  // 3-channel stem: 0.035 against 0.085).
  if (g.R * g.S > 1 && g.C / g.groups >= 16) return "nhwc_implicit_gemm";
  return "implicit_gemm";
}

const char* backward_data_rule(const Conv2dGeometry& g, cuda::GemmMath math) {
  if (g.depthwise()) return "depthwise_direct";
  if (g.pointwise()) return "pointwise_gemm";
  if (math == cuda::GemmMath::fp32) return fp32_rule(ConvPass::backward_data, g);
  if (winograd_pays(ConvPass::backward_data, g)) return tensor_winograd(ConvPass::backward_data, g);
  // Few input channels a group: v2's implicit GEMM then fills few rows of its tiles (C/G rows)
  // while every element it loads pays the patch index arithmetic (H200, LeNet conv2 at N = 256).
  if (g.C / g.groups < 32) return "im2col_gemm";
  // Tensor cores: v2's gather reads mostly zeros at stride 2 (0.70-0.86 ms); v1 (im2col + the
  // tf32 GEMM + col2im) wins on 8x8 maps and smaller (0.16 against v9's 0.24 ms), v9 above.
  return g.H * g.W <= 64 ? "im2col_gemm" : "nhwc_implicit_gemm";
}

const char* backward_filter_rule(const Conv2dGeometry& g, cuda::GemmMath math) {
  // In tf32 and bf16 v6 (fp32) still beats v5 and v2 on tensor cores for 3x3 layers, and v2's
  // split GEMM is within 10% of the fastest elsewhere (MEASUREMENTS.md).
  if (g.depthwise()) return "depthwise_direct";
  if (math == cuda::GemmMath::fp32) return fp32_rule(ConvPass::backward_filter, g);
  if (winograd_pays(ConvPass::backward_filter, g)) return "winograd_4x4";
  return "implicit_gemm";
}

const char* heuristic(ConvPass pass, const Conv2dGeometry& g, cuda::GemmMath math) {
  switch (pass) {
    case ConvPass::forward:
      return forward_rule(g, math);
    case ConvPass::backward_data:
      return backward_data_rule(g, math);
    case ConvPass::backward_filter:
      break;
  }
  return backward_filter_rule(g, math);
}

}  // namespace

std::string ConvRequest::str() const {
  switch (mode) {
    case Mode::heuristic:
      return "auto";
    case Mode::measure:
      return "find";
    case Mode::pinned:
      return pinned->name;
  }
  return "?";
}

std::optional<ConvRequest> parse_conv_algorithm(const std::string& text) {
  ConvRequest request;
  if (text == "auto") return request;
  if (text == "find") {
    request.mode = ConvRequest::Mode::measure;
    return request;
  }
  const ConvAlgorithm* algorithm = conv_algorithm_named(text);
  if (algorithm == nullptr) return std::nullopt;
  return ConvRequest::pin(*algorithm);
}

std::string conv_algorithm_spellings() {
  std::string text = "auto, find";
  for (const ConvAlgorithm* algorithm : conv_algorithms())
    text += std::string(", ") + algorithm->name;
  return text;
}

void check_conv_algorithm(const ConvAlgorithm& algorithm, ConvPass pass, const Conv2dGeometry& g,
                          const std::string& where) {
  if (algorithm.supports(pass, g)) return;
  std::string usable;
  for (const ConvAlgorithm* a : conv_algorithms()) {
    if (a->supports(pass, g)) usable += std::string(usable.empty() ? "" : ", ") + a->name;
  }
  throw Error(where + ": " + algorithm.name + " does not implement " + conv_pass_name(pass) +
              " for this geometry (" + conv_algorithm_cache_key(pass, g, "", kNoWorkspaceLimit) +
              "; it needs " + algorithm.requirement + "); usable: " + usable +
              ", or auto, or find");
}

size_t conv_algorithm_workspace_bytes(const ConvAlgorithm& algorithm, ConvPass pass,
                                      const Conv2dGeometry& g) {
  return algorithm.workspace(pass, g, false) * sizeof(float);
}

const ConvAlgorithm& get_conv_algorithm(ConvPass pass, const Conv2dGeometry& g, cuda::GemmMath math,
                                        size_t workspace_limit_bytes) {
  const ConvAlgorithm& first = production(heuristic(pass, g, math));
  if (conv_algorithm_workspace_bytes(first, pass, g) <= workspace_limit_bytes) return first;
  for (const ConvAlgorithm* algorithm : conv_algorithms()) {
    if (algorithm->supports(pass, g) &&
        conv_algorithm_workspace_bytes(*algorithm, pass, g) <= workspace_limit_bytes) {
      return *algorithm;
    }
  }
  throw Error(conv_algorithm_cache_key(pass, g, "", kNoWorkspaceLimit) +
              ": no algorithm fits a workspace of " + std::to_string(workspace_limit_bytes) +
              " bytes");
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

std::string conv_algorithm_cache_key(ConvPass pass, const Conv2dGeometry& g,
                                     const std::string& device, size_t workspace_limit_bytes,
                                     cuda::GemmMath math) {
  std::ostringstream key;
  key << "conv2d " << conv_pass_name(pass) << " N" << g.N << " C" << g.C << " H" << g.H << " W"
      << g.W << " K" << g.K << " R" << g.R << " S" << g.S << " pad" << g.pad_h << "x" << g.pad_w
      << " stride" << g.stride_h << "x" << g.stride_w << " dilation" << g.dilation_h << "x"
      << g.dilation_w << " groups" << g.groups;
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

const ConvAlgorithm& find_conv_algorithm_cached(Context& ctx, ConvPass pass,
                                                const Conv2dGeometry& g,
                                                size_t workspace_limit_bytes, cuda::GemmMath math) {
  const std::string key =
      conv_algorithm_cache_key(pass, g, device_name(ctx), workspace_limit_bytes, math);
  std::map<std::string, std::string>& cache = ctx.algorithm_cache();
  if (auto it = cache.find(key); it != cache.end()) {
    const ConvAlgorithm* cached = conv_algorithm_named(it->second);
    if (cached && cached->supports(pass, g)) return *cached;
  }
  const std::vector<ConvAlgorithmPerf> results =
      find_conv_algorithms(ctx, pass, g, workspace_limit_bytes, math);
  // Sorted, ok first; the heuristic's algorithm always checks against itself, so unless it is
  // over the limit there is an ok result.
  if (results.empty() || results.front().status != ConvAlgorithmStatus::ok) {
    throw Error(key + ": no algorithm fits a workspace of " +
                std::to_string(workspace_limit_bytes) + " bytes");
  }
  cache[key] = results.front().algorithm->name;
  return *results.front().algorithm;
}

const ConvAlgorithm& select_conv_algorithm(Context& ctx, ConvPass pass, const Conv2dGeometry& g,
                                           const ConvRequest& request, const std::string& where) {
  ConvMemo* memo = request.memo;
  if (memo != nullptr && memo->geometry == g) return *memo->algorithm;
  check_sizes(where, g);
  const ConvAlgorithm* chosen = nullptr;
  switch (request.mode) {
    case ConvRequest::Mode::pinned:
      check_conv_algorithm(*request.pinned, pass, g, where);
      chosen = request.pinned;
      break;
    case ConvRequest::Mode::measure:
      chosen = &find_conv_algorithm_cached(ctx, pass, g, request.workspace_limit, request.math);
      break;
    case ConvRequest::Mode::heuristic:
      chosen = &get_conv_algorithm(pass, g, request.math, request.workspace_limit);
      break;
  }
  if (memo != nullptr) *memo = {g, chosen};
  return *chosen;
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
  if (path.empty()) return;
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
