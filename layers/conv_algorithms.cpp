#include "layers/conv_algorithms.h"

#include <cctype>
#include <vector>

#include "core/error.h"
#include "layers/key_error.h"
#include "layers/layer_keys.h"

namespace crema {
namespace {

using kernels::ConvPass;
using kernels::ConvRequest;

constexpr const char* kKey = "algorithm";
constexpr const char* kLimitKey = "workspace_limit";
constexpr std::array<const char*, 3> kPassKeys{"forward", "backward_data", "backward_filter"};

// The convolution pass a layer pass runs (Deconvolution swaps forward and backward data).
ConvPass conv_pass(int pass, bool transposed) {
  switch (pass) {
    case ConvAlgorithms::forward:
      return transposed ? ConvPass::backward_data : ConvPass::forward;
    case ConvAlgorithms::backward_data:
      return transposed ? ConvPass::forward : ConvPass::backward_data;
    default:
      return ConvPass::backward_filter;
  }
}

// The node that says what layer pass `pass` runs: algorithm.<pass> or algorithm itself.
const ConfigNode& pass_node(const LayerSpec& spec, int pass) {
  const ConfigNode& node = spec.node->at(kKey);
  return node.is_map() ? node.at(kPassKeys[pass]) : node;
}

std::string key_name(const LayerSpec& spec, int pass) {
  return spec.node->at(kKey).is_map() ? std::string(kKey) + "." + kPassKeys[pass] : kKey;
}

ConvRequest read_request(const LayerSpec& spec, const ConfigNode& value, const std::string& key) {
  const std::string text = value.as<std::string>();
  // A build without CUDA has no algorithms to name or choose: the key is read and ignored, so a
  // config written for a GPU runs unchanged on the CPU.
  if (kernels::conv_algorithms().empty()) return ConvRequest{};
  if (const auto request = kernels::parse_conv_algorithm(text)) return *request;
  std::vector<std::string> names{"auto", "find"};
  for (const kernels::ConvAlgorithm* a : kernels::conv_algorithms()) names.push_back(a->name);
  const std::string close = closest_match(text, names);
  value.fail("layer '" + spec.name + "' (" + spec.type + "): " + key + ": unknown algorithm '" +
             text + "'" + (close.empty() ? "" : " (did you mean '" + close + "'?)") +
             "; choose from " + kernels::conv_algorithm_spellings());
}

// The `algorithm:` key: one request for every pass, or a map of per-pass ones (absent: auto).
std::array<ConvRequest, 3> read_requests(const LayerSpec& spec) {
  std::array<ConvRequest, 3> requests{};
  if (spec.node == nullptr || !spec.node->has(kKey)) return requests;
  const ConfigNode& node = spec.node->at(kKey);
  if (node.is_scalar()) {
    requests.fill(read_request(spec, node, kKey));
    return requests;
  }
  if (!node.is_map()) {
    fail_at_key(spec, kKey,
                "expected one algorithm for every pass or a map {forward: ..., backward_data: "
                "..., backward_filter: ...}");
  }
  for (size_t pass = 0; pass < kPassKeys.size(); ++pass) {
    if (!node.has(kPassKeys[pass])) continue;
    const std::string key = std::string(kKey) + "." + kPassKeys[pass];
    requests[pass] = read_request(spec, node.at(kPassKeys[pass]), key);
  }
  node.check_no_unknown_keys(std::string(kKey) + " of layer '" + spec.name + "'");
  return requests;
}

// The layer's workspace_limit, else the net's model.workspace_limit, else none.
size_t read_workspace_limit(const LayerSpec& spec) {
  const bool own = spec.node != nullptr && spec.node->has(kLimitKey);
  const ConfigNode* node = own ? &spec.node->at(kLimitKey) : spec.workspace_limit;
  if (node == nullptr) return kernels::kNoWorkspaceLimit;
  const std::string text = node->as<std::string>();
  if (const auto limit = parse_workspace_limit(text)) return *limit;
  node->fail(std::string(own ? "layer '" + spec.name + "' (" + spec.type + "): " + kLimitKey
                             : std::string("model.workspace_limit")) +
             ": expected a size such as 1048576, 512KiB, 256MiB, 2GiB (or KB, MB, GB) or none, "
             "got '" +
             text + "'");
}

}  // namespace

std::optional<size_t> parse_workspace_limit(const std::string& text) {
  if (text == "none") return kernels::kNoWorkspaceLimit;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 18) return std::nullopt;
  const size_t count = std::stoull(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  struct Unit {
    const char* name;
    size_t bytes;
  };
  constexpr Unit kUnits[] = {
      {"", 1},      {"B", 1},        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
      {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (count > kernels::kNoWorkspaceLimit / u.bytes) return std::nullopt;
    return count * u.bytes;
  }
  return std::nullopt;
}

ConvAlgorithms::ConvAlgorithms(const LayerSpec& spec, bool transposed)
    : requests_(read_requests(spec)), math_(read_math(spec)) {
  const size_t limit = read_workspace_limit(spec);
  for (int pass = 0; pass < 3; ++pass) {
    requests_[pass].math = math_;
    requests_[pass].workspace_limit = limit;
    pass_[pass] = conv_pass(pass, transposed);
  }
}

void ConvAlgorithms::check(const LayerSpec& spec, const kernels::Conv2dGeometry& g) const {
  g.validate("layer '" + spec.name + "'");
  for (int pass = 0; pass < 3; ++pass) {
    const ConvRequest& request = requests_[pass];
    if (request.mode != ConvRequest::Mode::pinned) continue;
    const ConvPass conv = pass_[pass];
    if (request.pinned->supports(conv, g)) continue;
    std::string usable;
    for (const kernels::ConvAlgorithm* a : kernels::conv_algorithms()) {
      if (a->supports(conv, g)) usable += std::string(usable.empty() ? "" : ", ") + a->name;
    }
    pass_node(spec, pass)
        .fail("layer '" + spec.name + "' (" + spec.type + "): " + key_name(spec, pass) + ": " +
              request.str() + " does not implement the " + kPassKeys[pass] +
              " pass of this layer (" + kernels::conv_algorithm_cache_key(conv, g, "", 0) +
              "); usable here: " + usable + ", auto or find");
  }
}

void ConvAlgorithms::check(const LayerSpec& spec, const kernels::ConvNdGeometry& g) const {
  if (g.rank < 3) {
    check(spec, g.as_2d());
    return;
  }
  g.validate("layer '" + spec.name + "'");
  for (int pass = 0; pass < 3; ++pass) {
    if (requests_[pass].mode != ConvRequest::Mode::pinned) continue;
    pass_node(spec, pass)
        .fail("layer '" + spec.name + "' (" + spec.type + "): " + key_name(spec, pass) + ": " +
              requests_[pass].str() + " is a 2-D algorithm; a 3-D convolution has one " +
              "(vol2col + GEMM): use auto or find");
  }
}

ConvRequest ConvAlgorithms::request(Pass pass) {
  ConvRequest request = requests_[pass];
  request.memo = &memos_[pass];
  return request;
}

std::string ConvAlgorithms::describe() const {
  std::string text;
  for (int pass = 0; pass < 3; ++pass) {
    if (memos_[pass].algorithm == nullptr) continue;
    const ConvRequest& request = requests_[pass];
    text += std::string(text.empty() ? "" : ", ") + kPassKeys[pass] + " " +
            memos_[pass].algorithm->name;
    if (request.mode != ConvRequest::Mode::pinned) text += " (" + request.str() + ")";
  }
  return text.empty() ? text : text + describe_math();
}

std::string ConvAlgorithms::describe_math() const {
  if (math_ == kernels::cuda::GemmMath::fp32) return "";
  return std::string(", math ") + kernels::cuda::gemm_math_name(math_);
}

}  // namespace crema
