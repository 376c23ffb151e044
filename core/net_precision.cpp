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
  // against 95.9 in nchw, and bf16/fp16 only there (their tensor-core convolutions are nhwc);
  // fp32 stays nchw (its FFMA algorithms are nchw's, 128.6 ms).
  const bool tensor_cores = net.precision != Precision::fp32;
  net.layout = tensor_cores && device.is_cuda() ? Layout::nhwc : Layout::nchw;
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
