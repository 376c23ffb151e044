// Choosing a convolution algorithm per pass and geometry, as cuDNN does.
//
// A convolution pass (forward, backward data, backward filter) has several CUDA versions
// (convolution.h: cuda::ConvVersion), each supporting some geometries, each fastest on some.
// Three ways to pick one, as a layer's `algorithm:` key spells them:
//   auto     get_conv_algorithm: the heuristic, from the geometry and math alone (cuDNN's Get).
//            Free, deterministic, and what every Tensor-level call uses when given no version.
//   find     find_conv_algorithms: time every version that supports the geometry on the device,
//            under a workspace limit, each first checked against the heuristic's output (cuDNN's
//            Find). The winner is remembered per (pass, geometry, device, limit) in the Context's
//            algorithm_cache(), so a shape is measured once per process; save_algorithm_cache and
//            load_algorithm_cache keep it in a file between runs (`--algo-cache FILE`).
//   <name>   one version pinned ("implicit_gemm"); it must support the geometry.
// Every version reports its workspace (cuda::conv2d_*_workspace); find reports it in bytes.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "kernels/convolution/convolution.h"

namespace crema::kernels {

// What `algorithm:` asks for one pass.
struct ConvAlgorithmRequest {
  enum class Mode { heuristic, measure, pinned };  // "auto", "find", a version's name
  Mode mode = Mode::heuristic;
  cuda::ConvVersion version = cuda::ConvVersion::best;  // the pinned one (Mode::pinned)
  std::string str() const;
};
// "auto", "find" or a version name (cuda::conv_version_from_name); nullopt for anything else.
std::optional<ConvAlgorithmRequest> parse_conv_algorithm(const std::string& text);
// Every accepted spelling, for error messages: "auto, find, im2col_gemm, implicit_gemm, ...".
std::string conv_algorithm_spellings();

// The heuristic: the version production runs for `pass` on g in `math` (cuda::forward_version
// and its siblings: in tf32 and bf16 the versions measured fastest with tensor cores). The same
// geometry and math always give the same version.
cuda::ConvVersion get_conv_algorithm(cuda::ConvPass pass, const Conv2dGeometry& g,
                                     cuda::GemmMath math = cuda::GemmMath::fp32);

// The workspace a version needs for a pass, in bytes (the filter pass without the bias).
size_t conv_algorithm_workspace_bytes(cuda::ConvVersion version, cuda::ConvPass pass,
                                      const Conv2dGeometry& g);

enum class ConvAlgorithmStatus {
  ok,                    // checked and timed
  over_workspace_limit,  // not run: needs more workspace than allowed
  mismatch,              // ran, but its output differs from the heuristic version's
};
const char* conv_algorithm_status_name(ConvAlgorithmStatus status);

struct ConvAlgorithmPerf {
  cuda::ConvVersion version;
  ConvAlgorithmStatus status;
  double ms = 0;  // median of the timed runs (ok only)
  size_t workspace_bytes = 0;
  double rel_error = 0;  // ||out - heuristic's out|| / ||heuristic's out|| (when it ran)
};

// The largest relative difference from the heuristic version's output find accepts (fp32 sums in
// another order differ by about 1e-6; a wrong index or a lower precision differs far more).
constexpr double kConvFindTolerance = 1e-4;
// The same in `math` (the reference stays fp32): fp32 kConvFindTolerance, tf32 2e-3 (operands
// rounded to 10-bit mantissas), bf16 1e-2 (7-bit mantissas).
double conv_find_tolerance(cuda::GemmMath math);

// cuDNN's Find on the context's device: every version that supports (pass, g), on scratch tensors
// from the context filled with random values (a fixed seed; the context's generator is not
// touched), run once and checked against the heuristic version, then timed (median of a few
// runs after a warm-up). Sorted: ok results fastest first, then mismatches, then those over the
// limit. Synchronizes the stream (it reads results back): call it outside CUDA-graph capture.
// Throws crema::Error on a CPU context. Every version runs in `math` (those that compute in fp32
// whatever the math too: cuda::computes_in); the heuristic's reference runs in fp32 and a
// version passes within conv_find_tolerance(math).
std::vector<ConvAlgorithmPerf> find_conv_algorithms(Context& ctx, cuda::ConvPass pass,
                                                    const Conv2dGeometry& g,
                                                    size_t workspace_limit_bytes,
                                                    cuda::GemmMath math = cuda::GemmMath::fp32);

// The key of (pass, g, device, limit, math) in Context::algorithm_cache():
// "conv2d forward N64 C64 H56 W56 K64 R3 S3 pad1x1 stride1x1 dilation1x1 groups1 ws<=any on
// NVIDIA H200, sm_90, ...", with " math tf32" (or bf16) after the groups for a math other than
// fp32 (so caches written before math modes existed keep their fp32 entries).
std::string conv_algorithm_cache_key(cuda::ConvPass pass, const Conv2dGeometry& g,
                                     const std::string& device, size_t workspace_limit_bytes,
                                     cuda::GemmMath math = cuda::GemmMath::fp32);
// find_conv_algorithms' fastest ok version, measured once per key: a cached name that this
// build does not know, or that does not support g, is measured again.
cuda::ConvVersion find_conv_algorithm_cached(Context& ctx, cuda::ConvPass pass,
                                             const Conv2dGeometry& g, size_t workspace_limit_bytes,
                                             cuda::GemmMath math = cuda::GemmMath::fp32);
// The version `request` picks for (pass, g) in `math`: get (in that math), find (cached per
// math) or the pinned one. Throws crema::Error naming `where` when a pinned
// version does not support (pass, g).
cuda::ConvVersion choose_conv_algorithm(Context& ctx, cuda::ConvPass pass, const Conv2dGeometry& g,
                                        const ConvAlgorithmRequest& request,
                                        size_t workspace_limit_bytes, const std::string& where,
                                        cuda::GemmMath math = cuda::GemmMath::fp32);

// The algorithm cache as a JSON file: {"crema_algorithm_cache": 1, "entries": {key: name}}.
// load merges the file's entries into `cache` (a missing file adds nothing; a malformed one
// throws crema::Error naming it); save writes all of `cache` (atomically: a temporary, renamed).
void load_algorithm_cache(const std::string& path, std::map<std::string, std::string>& cache);
void save_algorithm_cache(const std::string& path, const std::map<std::string, std::string>& cache);

}  // namespace crema::kernels
