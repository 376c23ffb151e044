#include "layers/weighted_layer.h"

#include <tuple>

#include "layers/key_error.h"

namespace crema {

WeightedLayer::WeightedLayer(const LayerSpec& spec) : Layer(spec) {
  const ConfigNode& node = *spec.node;
  bias_term_ = node.get<bool>("bias_term", true);
  FillerSpec xavier;
  xavier.type = "xavier";
  weight_filler_ = read_filler(node, "weight_filler", xavier);
  bias_filler_ = read_filler(node, "bias_filler", FillerSpec{});
}

void WeightedLayer::create_weight_and_bias(const Shape& weight_shape, int64_t num_outputs,
                                           Context& ctx) {
  add_param("weight", weight_shape, ctx);
  fill_tensor(weight_filler_, ctx.random(), params_[0].value);
  if (bias_term_) {
    add_param("bias", {num_outputs}, ctx);
    fill_tensor(bias_filler_, ctx.random(), params_[1].value);
  }
}

Tensor* WeightedLayer::weight_grad() {
  return weight().frozen() ? nullptr : &weight().grad;
}

Tensor* WeightedLayer::bias_grad() {
  return bias_term_ && !bias().frozen() ? &bias().grad : nullptr;
}

namespace {

using Size2 = std::pair<int64_t, int64_t>;

int64_t checked(const LayerSpec& spec, const std::string& key, int64_t value, int64_t minimum) {
  if (value < minimum) {
    fail_at_key(spec, key,
                (minimum == 0 ? std::string("must not be negative")
                              : "must be at least " + std::to_string(minimum)) +
                    ", got " + std::to_string(value));
  }
  return value;
}

}  // namespace

std::pair<int64_t, int64_t> read_spatial(const LayerSpec& spec, const std::string& key,
                                         const std::string& prefix,
                                         std::optional<std::pair<int64_t, int64_t>> fallback,
                                         int64_t minimum) {
  const ConfigNode& node = *spec.node;
  const std::string key_h = prefix + "_h", key_w = prefix + "_w";
  const bool has_h = !prefix.empty() && node.has(key_h);
  const bool has_w = !prefix.empty() && node.has(key_w);
  if (node.has(key)) {
    if (has_h || has_w) {
      fail_at_key(spec, key, "give " + key + " or " + key_h + " and " + key_w + ", not both");
    }
    const ConfigNode& value = node.at(key);
    if (value.is_scalar()) {
      const int64_t v = checked(spec, key, value.as<int64_t>(), minimum);
      return {v, v};
    }
    if (!value.is_sequence() || value.size() != 2) {
      fail_at_key(spec, key, "expected one integer or [height, width]");
    }
    return {checked(spec, key, value[0].as<int64_t>(), minimum),
            checked(spec, key, value[1].as<int64_t>(), minimum)};
  }
  if (has_h != has_w) {
    fail_at_key(spec, has_h ? key_h : key_w,
                "give both " + key_h + " and " + key_w + " (or " + key + ")");
  }
  if (has_h) {
    return {checked(spec, key_h, node.get<int64_t>(key_h), minimum),
            checked(spec, key_w, node.get<int64_t>(key_w), minimum)};
  }
  if (!fallback) {
    fail_missing_key(spec, key, "required (or " + key_h + " and " + key_w + ")");
  }
  return *fallback;
}

ConvolutionKeys::ConvolutionKeys(const LayerSpec& spec) {
  const ConfigNode& node = *spec.node;
  if (!node.has("num_output")) fail_missing_key(spec, "num_output", "required");
  num_output = checked(spec, "num_output", node.get<int64_t>("num_output"), 1);
  std::tie(kernel_h, kernel_w) = read_spatial(spec, "kernel_size", "kernel", std::nullopt, 1);
  std::tie(stride_h, stride_w) = read_spatial(spec, "stride", "stride", Size2{1, 1}, 1);
  std::tie(pad_h, pad_w) = read_spatial(spec, "pad", "pad", Size2{0, 0}, 0);
  std::tie(dilation_h, dilation_w) = read_spatial(spec, "dilation", "", Size2{1, 1}, 1);
  group = checked(spec, "group", node.get<int64_t>("group", 1), 1);
}

void ConvolutionKeys::check_groups(const LayerSpec& spec, int64_t input_channels,
                                   int64_t output_channels) const {
  if (input_channels % group != 0 || output_channels % group != 0) {
    fail_at_key(spec, "group",
                std::to_string(group) + " groups must divide both the " +
                    std::to_string(input_channels) + " input channels and the " +
                    std::to_string(output_channels) + " output channels");
  }
}

kernels::Conv2dGeometry ConvolutionKeys::geometry(int64_t N, int64_t C, int64_t H, int64_t W,
                                                  int64_t K) const {
  kernels::Conv2dGeometry g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.R = kernel_h, g.S = kernel_w;
  g.pad_h = pad_h, g.pad_w = pad_w, g.stride_h = stride_h, g.stride_w = stride_w;
  g.dilation_h = dilation_h, g.dilation_w = dilation_w, g.groups = group;
  return g;
}

}  // namespace crema
