#include "layers/filler.h"

#include <cmath>

#include "core/error.h"

namespace crema {
namespace {

void fill_host(const FillerSpec& spec, Random& random, Tensor& tensor);

}  // namespace

FillerSpec read_filler(const ConfigNode& layer, const std::string& key, const FillerSpec& fallback) {
  if (!layer.has(key)) return fallback;
  const ConfigNode& node = layer.at(key);
  FillerSpec spec;
  spec.type = node.get<std::string>("type");
  if (spec.type == "constant") {
    spec.value = node.get<double>("value", 0.0);
  } else if (spec.type == "uniform") {
    spec.min = node.get<double>("min", 0.0);
    spec.max = node.get<double>("max", 1.0);
    if (spec.max < spec.min) node.fail(key + ": max must not be less than min");
  } else if (spec.type == "gaussian") {
    spec.mean = node.get<double>("mean", 0.0);
    spec.std = node.get<double>("std", 0.01);
    if (spec.std < 0) node.fail(key + ": std must not be negative");
  } else if (spec.type == "xavier" || spec.type == "msra") {
    spec.variance_norm = node.get<std::string>("variance_norm", "fan_in");
    if (spec.variance_norm != "fan_in" && spec.variance_norm != "fan_out" &&
        spec.variance_norm != "average") {
      node.at("variance_norm").fail("variance_norm must be fan_in, fan_out or average, got '" +
                                    spec.variance_norm + "'");
    }
  } else {
    node.at("type").fail("unknown filler type '" + spec.type +
                         "' (known: constant, uniform, gaussian, xavier, msra)");
  }
  node.check_no_unknown_keys(key + " (" + spec.type + " filler)");
  return spec;
}

void fill_tensor(const FillerSpec& spec, Random& random, Tensor& target) {
  // Drawn on the host in a fixed order (the same values on every device), then copied.
  Tensor tensor = target.device().is_cpu() ? target : Tensor(target.shape());
  fill_host(spec, random, tensor);
  if (!target.shares_storage(tensor)) target.copy_from(tensor);
}

namespace {

void fill_host(const FillerSpec& spec, Random& random, Tensor& tensor) {
  float* data = tensor.data<float>();
  const int64_t count = tensor.numel();
  if (spec.type == "constant") {
    for (int64_t i = 0; i < count; ++i) data[i] = float(spec.value);
    return;
  }
  if (spec.type == "uniform") {
    for (int64_t i = 0; i < count; ++i) data[i] = float(random.uniform(spec.min, spec.max));
    return;
  }
  if (spec.type == "gaussian") {
    for (int64_t i = 0; i < count; ++i) data[i] = float(random.gaussian(spec.mean, spec.std));
    return;
  }
  const double fan_in = tensor.ndim() > 0 ? double(count) / double(tensor.dim(0)) : 1.0;
  const double fan_out = tensor.ndim() > 1 ? double(count) / double(tensor.dim(1)) : fan_in;
  double n = fan_in;
  if (spec.variance_norm == "fan_out") n = fan_out;
  if (spec.variance_norm == "average") n = (fan_in + fan_out) / 2.0;
  if (spec.type == "xavier") {
    const double a = std::sqrt(3.0 / n);
    for (int64_t i = 0; i < count; ++i) data[i] = float(random.uniform(-a, a));
  } else {
    CREMA_CHECK(spec.type == "msra", "unknown filler " + spec.type);
    const double s = std::sqrt(2.0 / n);
    for (int64_t i = 0; i < count; ++i) data[i] = float(random.gaussian(0.0, s));
  }
}

}  // namespace

}  // namespace crema
