// Test support: the checks every layer test repeats, written once on top of LayerHarness.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/layer_harness.h"

namespace crema::testing {

// Uniform values in [-range, range) for every element of a tensor of shape `x`.
std::vector<float> random_input(const Shape& x, uint64_t seed, float range = 1.0f);

// Builds `yaml` in float64 on one bottom of shape `x` holding `values` (in `layout`'s memory
// order) and checks its backward against central differences (check_gradients). The YAML goes
// into the failure trace.
void check_layer_gradients(const std::string& yaml, const Shape& x,
                           const std::vector<float>& values,
                           const GradientCheckOptions& options = {}, Layout layout = Layout::nchw);

// The shape of the first top of `yaml` built on `bottoms`.
Shape top_shape(const std::string& yaml, const std::vector<Shape>& bottoms);

// One input of a gradient check: a layer's keys after its name and type, and its bottom's shape.
struct GradientCase {
  std::string keys;
  Shape x;
};

// check_layer_gradients on "{" + head + ", " + keys + "}" for each case, the input of case i
// uniform in [-1, 1) from seed i + 1.
void check_gradient_cases(const std::string& head, const std::vector<GradientCase>& cases);

// The message of the crema::Error that building `yaml` on `bottoms` (zeros) and running one
// forward pass throws; "" when both succeed.
std::string layer_error(const std::string& yaml, const std::vector<Shape>& bottoms,
                        int num_tops = 1);

// Building `yaml` on `bottoms` (and one forward pass) must fail with a message that holds every
// one of `parts` (the layer's name, the key, the fix).
void expect_layer_error(const std::string& yaml, const std::vector<Shape>& bottoms,
                        const std::vector<std::string>& parts, int num_tops = 1);

// A layer with a weight and a bias, built from "{" + keys + "}", with one parameter frozen in
// turn (param: {weight|bias: {lr_mult: 0}}): backward must leave the frozen gradient as it was
// and give the other parameter and the input the same bits as the unfrozen layer. Input values
// come from `seed`, top gradients from seed + 1.
void check_frozen_parameters(const std::string& keys, const Shape& x, uint64_t seed);

}  // namespace crema::testing
