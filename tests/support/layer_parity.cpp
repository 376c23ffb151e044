#include "tests/support/layer_parity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/layer_harness.h"

namespace crema::testing {

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    diff += std::isnan(got[i]) ? INFINITY : d * d;
    norm += double(want[i]) * double(want[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

namespace {

void expect_close(const std::string& what, const Tensor& gpu, const Tensor& cpu, double tolerance) {
  const std::vector<float> g = gpu.to_vector(), c = cpu.to_vector();
  ASSERT_EQ(g.size(), c.size()) << what;
  if (c.empty()) return;
  EXPECT_LE(relative_error(g, c), tolerance) << what << " differs between CUDA and CPU";
}

}  // namespace

void check_cuda_parity(const std::string& yaml, const std::vector<Shape>& bottom_shapes,
                       const ParityOptions& options) {
  Context cpu, gpu(Device::cuda(0));
  LayerHarness c(yaml, bottom_shapes, cpu, options.num_tops, options.phase, DType::f32,
                 options.layout);
  LayerHarness g(yaml, bottom_shapes, gpu, options.num_tops, options.phase, DType::f32,
                 options.layout);
  ASSERT_EQ(c.layer->params().size(), g.layer->params().size());
  for (size_t i = 0; i < c.layer->params().size(); ++i) {
    g.layer->params()[i].value.copy_from(c.layer->params()[i].value);
  }
  for (size_t i = 0; i < c.layer->buffers().size(); ++i) {
    g.layer->buffers()[i].value.copy_from(c.layer->buffers()[i].value);
  }
  for (size_t b = 0; b < bottom_shapes.size(); ++b) {
    const size_t count = size_t(c.bottom[b]->value.numel());
    const std::vector<float> values = options.bottom_values
                                          ? options.bottom_values(b, count)
                                          : random_values(count, -1.0f, 1.0f, 7 + b);
    c.set_bottom(b, values);
    g.set_bottom(b, values);
  }
  for (int pass = 0; pass < options.forward_passes; ++pass) {
    for (Blob* t : g.top) gpu.fill(t->value, NAN);
    c.forward();
    g.forward();
    gpu.synchronize();
    for (size_t t = 0; t < c.top.size(); ++t) {
      expect_close("top " + std::to_string(t) + " (pass " + std::to_string(pass) + ")",
                   g.top[t]->value, c.top[t]->value, options.tolerance);
    }
  }
  for (size_t i = 0; i < c.layer->buffers().size(); ++i) {
    expect_close("buffer " + c.layer->buffers()[i].name, g.layer->buffers()[i].value,
                 c.layer->buffers()[i].value, options.tolerance);
  }
  if (!options.run_backward) return;

  std::vector<bool> down = options.propagate_down;
  if (down.empty()) down.assign(bottom_shapes.size(), true);
  for (size_t t = 0; t < c.top.size(); ++t) {
    const std::vector<float> grad =
        random_values(size_t(c.top[t]->value.numel()), -1.0f, 1.0f, 50 + t);
    c.top[t]->grad.copy_from(Tensor::from_vector(c.top[t]->value.shape(), grad));
    g.top[t]->grad.copy_from(Tensor::from_vector(g.top[t]->value.shape(), grad));
  }
  for (size_t b = 0; b < bottom_shapes.size(); ++b) {
    cpu.fill(c.bottom[b]->grad, NAN);
    gpu.fill(g.bottom[b]->grad, NAN);
  }
  for (Param& p : c.layer->params()) cpu.fill(p.grad, 0.0f);
  for (Param& p : g.layer->params()) gpu.fill(p.grad, 0.0f);
  c.layer->backward(c.top, down, c.bottom, cpu);
  g.layer->backward(g.top, down, g.bottom, gpu);
  gpu.synchronize();
  for (size_t b = 0; b < bottom_shapes.size(); ++b) {
    if (down[b]) {
      expect_close("bottom " + std::to_string(b) + " gradient", g.bottom[b]->grad,
                   c.bottom[b]->grad, options.tolerance);
    }
  }
  for (size_t i = 0; i < c.layer->params().size(); ++i) {
    expect_close(c.layer->params()[i].name + " gradient", g.layer->params()[i].grad,
                 c.layer->params()[i].grad, options.tolerance);
  }
}

}  // namespace crema::testing
