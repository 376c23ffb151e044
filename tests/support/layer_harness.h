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
struct LayerHarness {
  LayerHarness(const std::string& yaml, const std::vector<Shape>& bottom_shapes, Context& ctx,
               int num_tops = 1, Phase phase = Phase::train);

  // Fills bottom `i` with values (as many as the bottom has elements), on any device.
  void set_bottom(size_t i, const std::vector<float>& values);
  void forward();

  ConfigNode node;
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> storage;
  std::vector<Blob*> bottom, top;
  Context& ctx;
};

struct GradientCheckOptions {
  double step = 1e-2;       // central-difference step
  double threshold = 2e-3;  // allowed |analytic - numeric| / max(1, |analytic|, |numeric|)
  // Skip inputs closer than this to a kink (ReLU at 0); 0 checks every input.
  double kink_range = 0.0;
  std::vector<bool> check_bottom;  // default: every bottom
  bool check_params = true;
};

// Random coefficients c define the objective L = sum over tops of <c, top>. The layer's
// backward (top grad = c) must match dL/d(input) computed by central differences for every
// element of the checked bottoms and parameters. Reports failures through GoogleTest.
void check_gradients(LayerHarness& h, const GradientCheckOptions& options = {});

// Uniform values in [low, high) from a seeded generator.
std::vector<float> random_values(size_t count, float low, float high, uint64_t seed);

}  // namespace crema::testing
