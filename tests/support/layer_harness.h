// Test support for layers: build one layer from a YAML line, give it blobs, and check its
// backward against central differences (Caffe's GradientChecker idea).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"

namespace crema::testing {

// A layer made from YAML such as "{name: c, type: Convolution, num_output: 3, kernel_size: 3}"
// with its bottom and top blobs, on ctx's device. The config tree lives as long as the harness.
// With dtype f64 (CPU only) its blobs are float64, its parameters and buffers are converted to
// float64 after setup (the filler's float32 values, exactly), and a layer makes its own tensors
// in its bottom's dtype: every kernel it calls then runs its double reference, and a kernel
// without one throws, naming the op. Every blob carries `layout` (as the Net gives a layer its
// bottoms and tops in the net's layout: a 4-D nhwc blob holds its values in [N, H, W, C] order).
struct LayerHarness {
  LayerHarness(const std::string& yaml, const std::vector<Shape>& bottom_shapes, Context& ctx,
               int num_tops = 1, Phase phase = Phase::train, DType dtype = DType::f32,
               Layout layout = Layout::nchw);

  // Fills bottom `i` with values (as many as the bottom has elements), on any device, in the
  // bottom's dtype.
  void set_bottom(size_t i, const std::vector<float>& values);
  void forward();

  ConfigNode node;
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> storage;
  std::vector<Blob*> bottom, top;
  Context& ctx;
  DType dtype;
};

// The check runs in the harness's dtype: float64 wherever the layer's kernels have a double path,
// so that the analytic gradient is compared with a central difference free of float32 rounding;
// float32 otherwise (tests/README.md "Gradient checks in double" lists them and says why).
struct GradientCheckOptions {
  // Central-difference step; 0: the dtype's, 1e-6 in float64 (truncation ~h^2 f''' = 1e-12,
  // rounding ~eps |L| / h = 2e-10 |L|), 1e-2 in float32 (rounding ~6e-6 |L|).
  double step = 0.0;
  // Allowed |analytic - numeric| / max(1, |analytic|, |numeric|); 0: the dtype's, 1e-6 in
  // float64, 2e-3 in float32.
  double threshold = 0.0;
  // Skip inputs closer than this to a kink (ReLU at 0); 0 checks every input.
  double kink_range = 0.0;
  std::vector<bool> check_bottom;  // default: every bottom
  bool check_params = true;
};

// Random coefficients c define the objective L = sum over tops of <c, top>. The layer's
// backward (top grad = c) must match dL/d(input) computed by central differences for every
// element of the checked bottoms and parameters. Reports failures through GoogleTest. CPU only.
void check_gradients(LayerHarness& h, const GradientCheckOptions& options = {});

// Copies values into t: a float32 tensor on any device, or a float64 one on the CPU (a harness
// built with DType::f64: its bottoms, top gradients, parameters and buffers).
void set_values(Tensor& t, const std::vector<float>& values);

// Uniform values in [low, high) from a seeded generator.
std::vector<float> random_values(size_t count, float low, float high, uint64_t seed);

}  // namespace crema::testing
