// Choosing a convolution algorithm per pass and geometry, as cuDNN does.
//
// A convolution pass (forward, backward data, backward filter) has several CUDA algorithms
// (algorithm.h: one record each, conv_algorithms() the production table), each supporting some
// geometries, each fastest on some. Three ways to pick one, as a layer's `algorithm:` key spells
// them (a ConvRequest):
//   auto     get_conv_algorithm: the heuristic, from the geometry and math alone (cuDNN's Get),
//            falling back to an algorithm whose workspace fits the limit when its first choice
//            does not. Free, deterministic, and what every Tensor-level call uses by default.
//   find     find_conv_algorithms: time every production algorithm that supports the geometry on
//            the device, under a workspace limit, each first checked against the heuristic's
//            output (cuDNN's Find). The winner is remembered per (pass, geometry, device, limit)
//            in the Context's algorithm_cache(), so a shape is measured once per process;
//            save_algorithm_cache and load_algorithm_cache keep it in a file between runs
//            (`--algo-cache FILE`).
//   <name>   one algorithm pinned ("implicit_gemm"); it must support the geometry.
// select_conv_algorithm is the one door: the Tensor-level calls (convolution.h) ask it once per
// call, and a layer's memo (ConvMemo) spares it the heuristic while the geometry stays.
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/algorithm.h"

namespace crema::kernels {

// No workspace limit.
constexpr size_t kNoWorkspaceLimit = std::numeric_limits<size_t>::max();

// Where a caller keeps a choice between calls: the algorithm chosen for `geometry` (a layer
// holds one per pass, so a training step does not run the heuristic or the cache lookup again).
struct ConvMemo {
  std::optional<Conv2dGeometry> geometry;
  const ConvAlgorithm* algorithm = nullptr;
};

// What a caller asks for one pass: how to choose, in which math, under which workspace limit.
struct ConvRequest {
  enum class Mode { heuristic, measure, pinned };  // "auto", "find", an algorithm's name
  Mode mode = Mode::heuristic;
  const ConvAlgorithm* pinned = nullptr;  // Mode::pinned: any record, the ladder's too
  cuda::GemmMath math = cuda::GemmMath::fp32;
  size_t workspace_limit = kNoWorkspaceLimit;  // bytes, for get's fallback and for find
  ConvMemo* memo = nullptr;                    // optional: the caller's memory of the choice

  static ConvRequest pin(const ConvAlgorithm& algorithm,
                         cuda::GemmMath math = cuda::GemmMath::fp32) {
    return {Mode::pinned, &algorithm, math};
  }
  std::string str() const;  // "auto", "find" or the pinned name
};
// "auto", "find" or a production algorithm's name; nullopt for anything else.
std::optional<ConvRequest> parse_conv_algorithm(const std::string& text);
// Every accepted spelling, for error messages: "auto, find, im2col_gemm, implicit_gemm, ...".
std::string conv_algorithm_spellings();

// Throws crema::Error naming `where` unless `algorithm` implements (pass, g); the message lists
// the production algorithms that do.
void check_conv_algorithm(const ConvAlgorithm& algorithm, ConvPass pass, const Conv2dGeometry& g,
                          const std::string& where);

// The heuristic: the production algorithm for `pass` on g in `math` (the README's rules: in tf32
// and bf16 the algorithms measured fastest with tensor cores). When its workspace is over
// `workspace_limit_bytes`, the first production algorithm (ladder order) that supports the pass
// and fits; crema::Error when none fits. The same arguments always give the same algorithm.
const ConvAlgorithm& get_conv_algorithm(ConvPass pass, const Conv2dGeometry& g,
                                        cuda::GemmMath math = cuda::GemmMath::fp32,
                                        size_t workspace_limit_bytes = kNoWorkspaceLimit);

// The workspace an algorithm needs for a pass, in bytes (the filter pass without the bias).
size_t conv_algorithm_workspace_bytes(const ConvAlgorithm& algorithm, ConvPass pass,
                                      const Conv2dGeometry& g);

enum class ConvAlgorithmStatus {
  ok,                    // checked and timed
  over_workspace_limit,  // not run: needs more workspace than allowed
  mismatch,              // ran, but its output differs from the heuristic's algorithm's
};
const char* conv_algorithm_status_name(ConvAlgorithmStatus status);

struct ConvAlgorithmPerf {
  const ConvAlgorithm* algorithm;
  ConvAlgorithmStatus status;
  double ms = 0;  // median of the timed runs (ok only)
  size_t workspace_bytes = 0;
  double rel_error = 0;  // ||out - heuristic's out|| / ||heuristic's out|| (when it ran)
};

// The largest relative difference from the heuristic algorithm's output find accepts (fp32 sums in
// another order differ by about 1e-6; a wrong index or a lower precision differs far more).
constexpr double kConvFindTolerance = 1e-4;
// The same in `math` (the reference stays fp32): fp32 kConvFindTolerance, tf32 2e-3 (operands
// rounded to 10-bit mantissas), bf16 1e-2 (7-bit mantissas).
double conv_find_tolerance(cuda::GemmMath math);

// cuDNN's Find on the context's device: every production algorithm that supports (pass, g), on
// scratch tensors from the context filled with random values (a fixed seed; the context's generator
// is not touched), run once and checked against the heuristic's algorithm, then timed (median of a
// few runs after a warm-up). Sorted: ok results fastest first, then mismatches, then those over the
// limit. Synchronizes the stream (it reads results back): call it outside CUDA-graph capture.
// Throws crema::Error on a CPU context. Every algorithm runs in `math` (those that compute in fp32
// whatever the math too: ConvAlgorithm::computes_in); the heuristic's reference runs in fp32 and an
// algorithm passes within conv_find_tolerance(math).
std::vector<ConvAlgorithmPerf> find_conv_algorithms(Context& ctx, ConvPass pass,
                                                    const Conv2dGeometry& g,
                                                    size_t workspace_limit_bytes,
                                                    cuda::GemmMath math = cuda::GemmMath::fp32);

// The key of (pass, g, device, limit, math) in Context::algorithm_cache():
// "conv2d forward N64 C64 H56 W56 K64 R3 S3 pad1x1 stride1x1 dilation1x1 groups1 ws<=any on
// NVIDIA H200, sm_90, ...", with " math tf32" (or bf16) after the groups for a math other than
// fp32 (so caches written before math modes existed keep their fp32 entries).
std::string conv_algorithm_cache_key(ConvPass pass, const Conv2dGeometry& g,
                                     const std::string& device, size_t workspace_limit_bytes,
                                     cuda::GemmMath math = cuda::GemmMath::fp32);
// find_conv_algorithms' fastest ok algorithm, measured once per key: a cached name that this
// build does not know, or that does not support g, is measured again.
const ConvAlgorithm& find_conv_algorithm_cached(Context& ctx, ConvPass pass,
                                                const Conv2dGeometry& g,
                                                size_t workspace_limit_bytes,
                                                cuda::GemmMath math = cuda::GemmMath::fp32);
// The algorithm `request` picks for (pass, g): the memo's when it was made for g, else get,
// find (cached per math and limit) or the pinned one, remembered in the memo. Throws crema::Error
// naming `where` when a pinned algorithm does not support (pass, g), or when a tensor of g has
// 2^31 elements or more.
const ConvAlgorithm& select_conv_algorithm(Context& ctx, ConvPass pass, const Conv2dGeometry& g,
                                           const ConvRequest& request, const std::string& where);

// The algorithm cache as a JSON file: {"crema_algorithm_cache": 1, "entries": {key: name}}.
// load merges the file's entries into `cache` (a missing file adds nothing; a malformed one
// throws crema::Error naming it); save writes all of `cache` (atomically: a temporary, renamed).
// An empty path (no --algo-cache) names no file: load adds nothing and save writes nothing.
void load_algorithm_cache(const std::string& path, std::map<std::string, std::string>& cache);
void save_algorithm_cache(const std::string& path, const std::map<std::string, std::string>& cache);

}  // namespace crema::kernels
