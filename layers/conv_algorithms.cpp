#include "layers/conv_algorithms.h"

#include <limits>
#include <vector>

#include "core/error.h"
#include "layers/key_error.h"
#include "layers/layer_keys.h"

namespace crema {
namespace {

using kernels::ConvAlgorithmRequest;
namespace cuda = kernels::cuda;

constexpr const char* kKey = "algorithm";
constexpr std::array<const char*, 3> kPassKeys{"forward", "backward_data", "backward_filter"};

bool same_geometry(const kernels::Conv2dGeometry& a, const kernels::Conv2dGeometry& b) {
  return a.N == b.N && a.C == b.C && a.H == b.H && a.W == b.W && a.K == b.K && a.R == b.R &&
         a.S == b.S && a.pad_h == b.pad_h && a.pad_w == b.pad_w && a.stride_h == b.stride_h &&
         a.stride_w == b.stride_w && a.dilation_h == b.dilation_h && a.dilation_w == b.dilation_w &&
         a.groups == b.groups;
}

// The node that says what layer pass `pass` runs: algorithm.<pass> or algorithm itself.
const ConfigNode& pass_node(const LayerSpec& spec, int pass) {
  const ConfigNode& node = spec.node->at(kKey);
  return node.is_map() ? node.at(kPassKeys[pass]) : node;
}

std::string key_name(const LayerSpec& spec, int pass) {
  return spec.node->at(kKey).is_map() ? std::string(kKey) + "." + kPassKeys[pass] : kKey;
}

ConvAlgorithmRequest read_request(const LayerSpec& spec, const ConfigNode& value,
                                  const std::string& key) {
  const std::string text = value.as<std::string>();
  if (const auto request = kernels::parse_conv_algorithm(text)) return *request;
  std::vector<std::string> names{"auto", "find"};
  for (cuda::ConvVersion v : cuda::conv_versions()) names.push_back(cuda::conv_version_name(v));
  const std::string close = closest_match(text, names);
  value.fail("layer '" + spec.name + "' (" + spec.type + "): " + key + ": unknown algorithm '" +
             text + "'" + (close.empty() ? "" : " (did you mean '" + close + "'?)") +
             "; choose from " + kernels::conv_algorithm_spellings());
}

}  // namespace

ConvAlgorithms::ConvAlgorithms(const LayerSpec& spec, bool transposed)
    : transposed_(transposed), math_(read_math(spec)) {
  if (spec.node == nullptr || !spec.node->has(kKey)) return;
  const ConfigNode& node = spec.node->at(kKey);
  if (node.is_scalar()) {
    requests_.fill(read_request(spec, node, kKey));
    return;
  }
  if (!node.is_map()) {
    fail_at_key(spec, kKey,
                "expected one algorithm for every pass or a map {forward: ..., backward_data: "
                "..., backward_filter: ...}");
  }
  for (size_t pass = 0; pass < kPassKeys.size(); ++pass) {
    if (!node.has(kPassKeys[pass])) continue;
    const std::string key = std::string(kKey) + "." + kPassKeys[pass];
    requests_[pass] = read_request(spec, node.at(kPassKeys[pass]), key);
  }
  node.check_no_unknown_keys(std::string(kKey) + " of layer '" + spec.name + "'");
}

cuda::ConvPass ConvAlgorithms::conv_pass(Pass pass) const {
  switch (pass) {
    case forward:
      return transposed_ ? cuda::ConvPass::backward_data : cuda::ConvPass::forward;
    case backward_data:
      return transposed_ ? cuda::ConvPass::forward : cuda::ConvPass::backward_data;
    case backward_filter:
      break;
  }
  return cuda::ConvPass::backward_filter;
}

void ConvAlgorithms::check(const LayerSpec& spec, const kernels::Conv2dGeometry& g) const {
  for (int pass = 0; pass < 3; ++pass) {
    const ConvAlgorithmRequest& request = requests_[pass];
    if (request.mode != ConvAlgorithmRequest::Mode::pinned) continue;
    const cuda::ConvPass conv = conv_pass(Pass(pass));
    if (cuda::supports(request.version, conv, g)) continue;
    std::string usable;
    for (cuda::ConvVersion v : cuda::conv_versions()) {
      if (cuda::supports(v, conv, g)) {
        usable += std::string(usable.empty() ? "" : ", ") + cuda::conv_version_name(v);
      }
    }
    pass_node(spec, pass)
        .fail("layer '" + spec.name + "' (" + spec.type + "): " + key_name(spec, pass) + ": " +
              request.str() + " does not implement the " + kPassKeys[pass] +
              " pass of this layer (" + kernels::conv_algorithm_cache_key(conv, g, "", 0) +
              "); usable here: " + usable + ", auto or find");
  }
}

void ConvAlgorithms::choose(Context& ctx, const kernels::Conv2dGeometry& g,
                            const std::string& where) {
  if (!ctx.device().is_cuda()) return;
  if (chosen_for_ && same_geometry(*chosen_for_, g)) return;
  for (int pass = 0; pass < 3; ++pass) {
    chosen_[pass] =
        kernels::choose_conv_algorithm(ctx, conv_pass(Pass(pass)), g, requests_[pass],
                                       std::numeric_limits<size_t>::max(), where, math_);
  }
  chosen_for_ = g;
}

std::string ConvAlgorithms::describe() const {
  if (!chosen_for_) return "";
  std::string text;
  for (int pass = 0; pass < 3; ++pass) {
    const ConvAlgorithmRequest& request = requests_[pass];
    text += std::string(pass ? ", " : "") + kPassKeys[pass] + " " +
            cuda::conv_version_name(*chosen_[pass]);
    if (request.mode != ConvAlgorithmRequest::Mode::pinned) text += " (" + request.str() + ")";
  }
  if (math_ != cuda::GemmMath::fp32) text += std::string(", math ") + cuda::gemm_math_name(math_);
  return text;
}

}  // namespace crema
