#include "tests/support/layer_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/random.h"
#include "layers/register_layers.h"

namespace crema::testing {

std::vector<float> random_values(size_t count, float low, float high, uint64_t seed) {
  Random random(seed);
  std::vector<float> v(count);
  for (float& x : v) x = float(random.uniform(low, high));
  return v;
}

namespace {

// A float32 host tensor's values in a new float64 tensor of its shape.
Tensor as_f64(const Tensor& t) {
  Tensor out(t.shape(), DType::f64);
  const float* from = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) out.data<double>()[i] = from[i];
  return out;
}

}  // namespace

LayerHarness::LayerHarness(const std::string& yaml, const std::vector<Shape>& bottom_shapes,
                           Context& context, int num_tops, Phase phase, DType tensor_dtype,
                           Layout layout)
    : node(parse_config(yaml, "test")), ctx(context), dtype(tensor_dtype) {
  CREMA_CHECK(dtype == DType::f32 || ctx.device().is_cpu(), "float64 layers run on the CPU only");
  auto blob_tensor = [&](const Shape& shape) {
    Tensor t = ctx.empty(shape, dtype);
    t.set_layout(layout);
    return t;
  };
  LayerSpec spec;
  spec.name = node.get<std::string>("name");
  spec.type = node.get<std::string>("type");
  spec.node = &node;
  spec.phase = phase;
  for (size_t i = 0; i < bottom_shapes.size(); ++i) {
    auto blob = std::make_unique<Blob>();
    blob->name = "bottom" + std::to_string(i);
    blob->value = blob_tensor(bottom_shapes[i]);
    blob->grad = blob_tensor(bottom_shapes[i]);
    ctx.fill(blob->value, 0.0f);
    bottom.push_back(blob.get());
    spec.bottoms.push_back(blob->name);
    storage.push_back(std::move(blob));
  }
  for (int i = 0; i < num_tops; ++i) {
    auto blob = std::make_unique<Blob>();
    blob->name = "top" + std::to_string(i);
    blob->value = blob_tensor({0});
    blob->grad = blob_tensor({0});
    top.push_back(blob.get());
    spec.tops.push_back(blob->name);
    storage.push_back(std::move(blob));
  }
  layer = builtin_layers().create(spec);
  layer->setup(bottom, top, ctx);
  if (dtype == DType::f64) {
    // Parameters and buffers are made in float32 (Layer::add_param); the same values in double.
    for (Param& p : layer->params()) {
      p.value = as_f64(p.value);
      p.grad = as_f64(p.grad);
    }
    for (Buffer& b : layer->buffers()) b.value = as_f64(b.value);
  }
  layer->reshape(bottom, top, ctx);
  for (Blob* t : top) t->grad.reshape(t->value.shape());
  node.check_no_unknown_keys("layer");
}

void set_values(Tensor& t, const std::vector<float>& values) {
  ASSERT_EQ(values.size(), size_t(t.numel()));
  if (t.dtype() == DType::f64) {
    for (size_t k = 0; k < values.size(); ++k) t.data<double>()[k] = values[k];
    return;
  }
  t.copy_from(Tensor::from_vector(t.shape(), values));
}

void LayerHarness::set_bottom(size_t i, const std::vector<float>& values) {
  set_values(bottom[i]->value, values);
}

void LayerHarness::forward() {
  layer->forward(bottom, top, ctx);
}

namespace {

// Element i of a host tensor of float32 or float64, as a double, and its assignment.
double element(const Tensor& t, size_t i) {
  return t.dtype() == DType::f64 ? t.data<double>()[i] : double(t.data<float>()[i]);
}
void set_element(Tensor& t, size_t i, double value) {
  if (t.dtype() == DType::f64) {
    t.data<double>()[i] = value;
  } else {
    t.data<float>()[i] = float(value);
  }
}

double objective(LayerHarness& h, const std::vector<std::vector<float>>& coef) {
  h.forward();
  double sum = 0.0;
  for (size_t t = 0; t < h.top.size(); ++t) {
    for (size_t i = 0; i < coef[t].size(); ++i) {
      sum += double(coef[t][i]) * element(h.top[t]->value, i);
    }
  }
  return sum;
}

void compare(const std::string& what, size_t index, double analytic, double numeric,
             double threshold) {
  const double scale = std::max({1.0, std::fabs(analytic), std::fabs(numeric)});
  EXPECT_LE(std::fabs(analytic - numeric), threshold * scale)
      << what << "[" << index << "]: analytic " << analytic << ", numeric " << numeric;
}

}  // namespace

void check_gradients(LayerHarness& h, const GradientCheckOptions& options) {
  const bool f64 = h.dtype == DType::f64;
  const double step = options.step > 0 ? options.step : f64 ? 1e-6 : 1e-2;
  const double threshold = options.threshold > 0 ? options.threshold : f64 ? 1e-6 : 2e-3;
  std::vector<std::vector<float>> coef;
  h.forward();
  for (size_t t = 0; t < h.top.size(); ++t) {
    coef.push_back(random_values(size_t(h.top[t]->value.numel()), -1.0f, 1.0f, 100 + t));
  }
  // Analytic gradients: top grads = coef; bottoms poisoned; parameter grads from zero.
  for (size_t t = 0; t < h.top.size(); ++t) {
    for (size_t i = 0; i < coef[t].size(); ++i) set_element(h.top[t]->grad, i, coef[t][i]);
  }
  std::vector<bool> down = options.check_bottom;
  if (down.empty()) down.assign(h.bottom.size(), true);
  for (size_t b = 0; b < h.bottom.size(); ++b) h.bottom[b]->grad.fill(NAN);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, down, h.bottom, h.ctx);

  auto check_tensor = [&](const std::string& what, Tensor& x, const Tensor& grad) {
    const Tensor analytic = grad.clone();
    for (size_t i = 0; i < size_t(x.numel()); ++i) {
      const double saved = element(x, i);
      if (options.kink_range > 0 && std::fabs(saved) < options.kink_range) continue;
      set_element(x, i, saved + step);
      const double plus = objective(h, coef);
      set_element(x, i, saved - step);
      const double minus = objective(h, coef);
      set_element(x, i, saved);
      compare(what, i, element(analytic, i), (plus - minus) / (2.0 * step), threshold);
    }
  };
  for (size_t b = 0; b < h.bottom.size(); ++b) {
    if (down[b]) check_tensor("bottom" + std::to_string(b), h.bottom[b]->value, h.bottom[b]->grad);
  }
  if (options.check_params) {
    for (Param& p : h.layer->params()) check_tensor(p.name, p.value, p.grad);
  }
}

}  // namespace crema::testing
