#include "tests/support/layer_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/random.h"
#include "layers/register_layers.h"

namespace crema::testing {

std::vector<float> random_values(size_t count, float low, float high, uint64_t seed) {
  Random random(seed);
  std::vector<float> v(count);
  for (float& x : v) x = float(random.uniform(low, high));
  return v;
}

LayerHarness::LayerHarness(const std::string& yaml, const std::vector<Shape>& bottom_shapes,
                           Context& context, int num_tops, Phase phase)
    : node(parse_config(yaml, "test")), ctx(context) {
  LayerSpec spec;
  spec.name = node.get<std::string>("name");
  spec.type = node.get<std::string>("type");
  spec.node = &node;
  spec.phase = phase;
  for (size_t i = 0; i < bottom_shapes.size(); ++i) {
    auto blob = std::make_unique<Blob>();
    blob->name = "bottom" + std::to_string(i);
    blob->value = ctx.empty(bottom_shapes[i]);
    blob->grad = ctx.empty(bottom_shapes[i]);
    ctx.fill(blob->value, 0.0f);
    bottom.push_back(blob.get());
    spec.bottoms.push_back(blob->name);
    storage.push_back(std::move(blob));
  }
  for (int i = 0; i < num_tops; ++i) {
    auto blob = std::make_unique<Blob>();
    blob->name = "top" + std::to_string(i);
    blob->value = ctx.empty({0});
    blob->grad = ctx.empty({0});
    top.push_back(blob.get());
    spec.tops.push_back(blob->name);
    storage.push_back(std::move(blob));
  }
  layer = builtin_layers().create(spec);
  layer->setup(bottom, top, ctx);
  layer->reshape(bottom, top, ctx);
  for (Blob* t : top) t->grad.reshape(t->value.shape());
  node.check_no_unknown_keys("layer");
}

void LayerHarness::set_bottom(size_t i, const std::vector<float>& values) {
  ASSERT_EQ(values.size(), size_t(bottom[i]->value.numel()));
  bottom[i]->value.copy_from(Tensor::from_vector(bottom[i]->value.shape(), values));
}

void LayerHarness::forward() { layer->forward(bottom, top, ctx); }

namespace {

double objective(LayerHarness& h, const std::vector<std::vector<float>>& coef) {
  h.forward();
  double sum = 0.0;
  for (size_t t = 0; t < h.top.size(); ++t) {
    const float* y = h.top[t]->value.data<float>();
    for (size_t i = 0; i < coef[t].size(); ++i) sum += double(coef[t][i]) * double(y[i]);
  }
  return sum;
}

void compare(const char* what, size_t index, double analytic, double numeric, double threshold) {
  const double scale = std::max({1.0, std::fabs(analytic), std::fabs(numeric)});
  EXPECT_LE(std::fabs(analytic - numeric), threshold * scale)
      << what << "[" << index << "]: analytic " << analytic << ", numeric " << numeric;
}

}  // namespace

void check_gradients(LayerHarness& h, const GradientCheckOptions& options) {
  std::vector<std::vector<float>> coef;
  h.forward();
  for (size_t t = 0; t < h.top.size(); ++t) {
    coef.push_back(random_values(size_t(h.top[t]->value.numel()), -1.0f, 1.0f, 100 + t));
  }
  // Analytic gradients: top grads = coef; bottoms poisoned; parameter grads from zero.
  for (size_t t = 0; t < h.top.size(); ++t) {
    std::memcpy(h.top[t]->grad.data<float>(), coef[t].data(), coef[t].size() * sizeof(float));
  }
  std::vector<bool> down = options.check_bottom;
  if (down.empty()) down.assign(h.bottom.size(), true);
  for (size_t b = 0; b < h.bottom.size(); ++b) h.bottom[b]->grad.fill(NAN);
  for (Param& p : h.layer->params()) p.grad.fill(0.0f);
  h.layer->backward(h.top, down, h.bottom, h.ctx);

  auto check_tensor = [&](const char* what, Tensor& x, const Tensor& grad) {
    const std::vector<float> analytic = grad.to_vector();
    float* data = x.data<float>();
    for (size_t i = 0; i < analytic.size(); ++i) {
      const float saved = data[i];
      if (options.kink_range > 0 && std::fabs(saved) < options.kink_range) continue;
      data[i] = float(saved + options.step);
      const double plus = objective(h, coef);
      data[i] = float(saved - options.step);
      const double minus = objective(h, coef);
      data[i] = saved;
      compare(what, i, analytic[i], (plus - minus) / (2.0 * options.step), options.threshold);
    }
  };
  for (size_t b = 0; b < h.bottom.size(); ++b) {
    if (down[b]) check_tensor(("bottom" + std::to_string(b)).c_str(), h.bottom[b]->value, h.bottom[b]->grad);
  }
  if (options.check_params) {
    for (Param& p : h.layer->params()) check_tensor(p.name.c_str(), p.value, p.grad);
  }
}

}  // namespace crema::testing
