#include "core/net_precision.h"

#include <vector>

#include "core/error.h"

namespace crema {

std::string format_name(const BlobFormat& format) {
  std::string name = dtype_name(format.dtype);
  if (format.layout == Layout::nhwc) name += " nhwc";
  return name;
}

bool stored_as(const Tensor& t, const BlobFormat& format) {
  return t.dtype() == format.dtype && (t.ndim() != 4 || t.layout() == format.layout);
}

namespace {

// A Convolution layer's node with a 1x1 filter (kernel_size 1, [1, 1] or kernel_h = kernel_w =
// 1). A malformed key counts as not 1x1: the layer names it when it is built.
bool is_pointwise(const ConfigNode& layer) {
  try {
    if (layer.has("kernel_size")) {
      const ConfigNode& k = layer.at("kernel_size");
      if (!k.is_sequence()) return k.as<int64_t>() == 1;
      for (size_t i = 0; i < k.size(); ++i) {
        if (k[i].as<int64_t>() != 1) return false;
      }
      return k.size() > 0;
    }
    return layer.get<int64_t>("kernel_h", 0) == 1 && layer.get<int64_t>("kernel_w", 0) == 1;
  } catch (const Error&) {
    return false;
  }
}

// A Convolution layer's node with more than one group (a malformed key counts as one).
bool is_grouped(const ConfigNode& layer) {
  try {
    return layer.get<int64_t>("group", 1) != 1;
  } catch (const Error&) {
    return false;
  }
}

// A depthwise Convolution as the zoo writes it: group == num_output > 1 (one filter a channel;
// the input's channel count is not in the node, and its builder checks it).
bool is_depthwise(const ConfigNode& layer) {
  try {
    const int64_t groups = layer.get<int64_t>("group", 1);
    return groups > 1 && groups == layer.get<int64_t>("num_output", 0);
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

bool mostly_pointwise(const ConfigNode& model) {
  if (!model.has("layers") || !model.at("layers").is_sequence()) return false;
  const ConfigNode& layers = model.at("layers");
  int pointwise = 0, others = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const ConfigNode& layer = layers[i];
    if (!layer.is_map() || layer.get<std::string>("type", "") != "Convolution") continue;
    if (is_depthwise(layer)) continue;  // nhwc has its own direct kernels: neither side
    if (is_grouped(layer)) return false;
    ++(is_pointwise(layer) ? pointwise : others);
  }
  return pointwise > 0 && pointwise >= 2 * others;
}

NetPrecision read_net_precision(const ConfigNode& model, const Device& device) {
  NetPrecision net;
  if (!model.is_map()) return net;
  if (model.has("precision")) {
    const std::string text = model.get<std::string>("precision");
    const auto precision = parse_precision(text);
    if (!precision) {
      model.at("precision")
          .fail("model.precision: unknown precision '" + text +
                "'; choose from fp32, tf32, bf16, fp16");
    }
    net.precision = *precision;
  }
  // Measured (H200, 2026-11-26, ResNet-50 b128): channels-last runs tf32 at 72.9 ms a step
  // against 95.9 in nchw, and bf16/fp16 only there (their tensor-core convolutions are nhwc).
  // fp32 (H200, 2026-11-27, `crema time`, fp32 steps nchw / nhwc): nhwc only for a net of plain
  // convolutions at least two thirds 1x1 (ResNet-50 b128: 128.0 / 121.7 ms); nchw for the rest:
  // 3x3s (ResNet-18 b256: 70.1 / 96.5, nchw's Winograd and tuned 3x3 algorithms having no nhwc
  // form), a bare majority of 1x1s (DenseNet-121 b64: 53.5 / 67.1). Depthwise convolutions count
  // on neither side since nhwc has direct kernels for them (H200, 2026-11-27, one call, b64, CUDA
  // graph steps: MobileNetV2 23.7 / 19.9 ms, EfficientNet-B0 33.3 / 26.8; before those kernels
  // 45.9 / 289.1 at b128); ConvNeXt-T, whose convolutions are depthwise 7x7s and 2x2/4x4
  // downsamplings, stays nchw (98.7 / 100.4).
  const bool tensor_cores = net.precision != Precision::fp32;
  net.layout =
      device.is_cuda() && (tensor_cores || mostly_pointwise(model)) ? Layout::nhwc : Layout::nchw;
  if (model.has("layout")) {
    const std::string text = model.get<std::string>("layout");
    if (text != "nchw" && text != "nhwc") {
      model.at("layout").fail("model.layout: unknown layout '" + text +
                              "'; choose from nchw, nhwc");
    }
    net.layout = text == "nhwc" ? Layout::nhwc : Layout::nchw;
  }
  return net;
}

BlobFormat layer_format(const Layer& layer, const NetPrecision& net, const Device& device) {
  const LayerSpec& spec = layer.spec();
  const bool own = !spec.precision.empty();
  const Precision precision = own ? *parse_precision(spec.precision) : net.precision;
  const DType dtype = activation_dtype(precision);
  const std::vector<BlobFormat> offers = {{dtype, net.layout},
                                          {dtype, Layout::nchw},
                                          {DType::f32, net.layout},
                                          {DType::f32, Layout::nchw}};
  for (const BlobFormat& f : offers) {
    if (own && f.dtype != dtype) break;  // a demand: no falling back to f32
    if (layer.runs(f.dtype, f.layout, device)) return f;
  }
  std::string runs;
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      if (layer.runs(d, l, device)) runs += (runs.empty() ? "" : ", ") + format_name({d, l});
    }
  }
  throw Error("layer '" + spec.name + "' (" + spec.type + "): precision " +
              precision_name(precision) + " asks for " + dtype_name(dtype) +
              " tensors, which it does not run on " + device.str() + " (it runs " +
              (runs.empty() ? "none of f32, bf16, f16" : runs) + ")");
}

BlobFormat keep_bottom_layout(const Layer& layer, const BlobFormat& format, const Tensor& bottom,
                              const Device& device) {
  const bool half = format.dtype == DType::bf16 || format.dtype == DType::f16;
  if (!half || bottom.ndim() != 4 || bottom.layout() == format.layout) return format;
  if (!layer.runs(format.dtype, bottom.layout(), device)) return format;
  return {format.dtype, bottom.layout()};
}

std::string default_math(Precision precision) {
  switch (precision) {
    case Precision::tf32:
    case Precision::fp16:
      return "tf32";
    case Precision::bf16:
      return "bf16";
    default:
      return "fp32";
  }
}

}  // namespace crema
