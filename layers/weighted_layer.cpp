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

SpatialSize read_spatial_size(const LayerSpec& spec, const std::string& key,
                              const std::string& prefix, std::optional<int64_t> fallback,
                              int64_t minimum) {
  const ConfigNode& node = *spec.node;
  if (node.has(key) && node.at(key).is_sequence() && node.at(key).size() != 2) {
    if (!prefix.empty() && (node.has(prefix + "_h") || node.has(prefix + "_w"))) {
      fail_at_key(spec, key, "give " + key + " or " + prefix + "_h and " + prefix + "_w, not both");
    }
    const ConfigNode& list = node.at(key);
    if (list.size() < 1 || list.size() > 3) {
      fail_at_key(spec, key, "expected one integer or a list of 1 to 3, one per spatial axis");
    }
    SpatialSize size{key, {}, false};
    for (size_t a = 0; a < list.size(); ++a) {
      size.values.push_back(checked(spec, key, list[a].as<int64_t>(), minimum));
    }
    return size;
  }
  const bool every_axis =
      node.has(key) ? node.at(key).is_scalar() : prefix.empty() || !node.has(prefix + "_h");
  const std::optional<Size2> both =
      fallback ? std::optional<Size2>(Size2{*fallback, *fallback}) : std::nullopt;
  const auto [h, w] = read_spatial(spec, key, prefix, both, minimum);
  return every_axis ? SpatialSize{key, {h}, true} : SpatialSize{key, {h, w}, false};
}

std::array<int64_t, 3> SpatialSize::for_rank(const LayerSpec& spec, int rank,
                                             const std::string& what) const {
  std::array<int64_t, 3> sizes{};
  if (!every_axis && int(values.size()) != rank) {
    fail_at_key(spec, key,
                std::to_string(values.size()) + " entries for the " + std::to_string(rank) +
                    " spatial " + (rank == 1 ? "axis" : "axes") + " of " + what +
                    "; give one value, or one per spatial axis");
  }
  for (int a = 0; a < rank; ++a) sizes[a] = every_axis ? values[0] : values[a];
  return sizes;
}

ConvolutionKeys::ConvolutionKeys(const LayerSpec& spec) {
  const ConfigNode& node = *spec.node;
  if (!node.has("num_output")) fail_missing_key(spec, "num_output", "required");
  num_output = checked(spec, "num_output", node.get<int64_t>("num_output"), 1);
  kernel = read_spatial_size(spec, "kernel_size", "kernel", std::nullopt, 1);
  stride = read_spatial_size(spec, "stride", "stride", 1, 1);
  pad = read_spatial_size(spec, "pad", "pad", 0, 0);
  dilation = read_spatial_size(spec, "dilation", "", 1, 1);
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

kernels::ConvNdGeometry ConvolutionKeys::geometry(const LayerSpec& spec, const Shape& input,
                                                  int64_t K) const {
  const int rank = int(input.size()) - 2;
  const std::string what = "the input " + shape_str(input);
  kernels::ConvNdGeometry g;
  g.rank = rank;
  g.N = input[0], g.C = input[1], g.K = K, g.groups = group;
  for (int a = 0; a < rank; ++a) g.in[a] = input[size_t(a) + 2];
  g.kernel = kernel.for_rank(spec, rank, what);
  g.stride = stride.for_rank(spec, rank, what);
  g.pad = pad.for_rank(spec, rank, what);
  g.dilation = dilation.for_rank(spec, rank, what);
  return g;
}

}  // namespace crema
