#include "layers/layer_keys.h"

#include "layers/key_error.h"

namespace crema {

std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key,
                                    std::pair<int64_t, int64_t> fallback) {
  return node.has(key) ? read_hw(node, key) : fallback;
}

std::pair<int64_t, int64_t> read_hw(const ConfigNode& node, const std::string& key) {
  const ConfigNode& value = node.at(key);
  if (value.is_scalar()) {
    const int64_t v = value.as<int64_t>();
    return {v, v};
  }
  if (!value.is_sequence() || value.size() != 2) {
    value.fail(key + ": expected one integer or [height, width]");
  }
  return {value[0].as<int64_t>(), value[1].as<int64_t>()};
}

kernels::cuda::GemmMath read_math(const LayerSpec& spec) {
  const bool own = spec.node != nullptr && spec.node->has("math");
  const std::string text = own ? spec.node->get<std::string>("math") : spec.math;
  if (const auto math = kernels::cuda::gemm_math_from_name(text)) return *math;
  fail_at_key(spec, "math",
              "unknown math '" + text + "'" + (own ? "" : " (from model.math)") +
                  "; choose from fp32, tf32, bf16");
}

}  // namespace crema
