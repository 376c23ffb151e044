// Test support: one layer on the GPU against the same layer on the CPU.
//
// Both layers are built from the same YAML; the GPU layer receives the CPU layer's parameters
// and buffers, both get the same random bottoms and top gradients, and then every top, every
// bottom gradient, every parameter gradient and every buffer must agree within `tolerance`
// (relative: ||gpu - cpu|| / ||cpu||). Outputs and gradients are poisoned with NaN first, so an
// element the GPU never writes fails the check.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/layer.h"

namespace crema::testing {

struct ParityOptions {
  int num_tops = 1;
  Phase phase = Phase::train;
  double tolerance = 1e-5;
  // Bottom `i`'s values (default: uniform in [-1, 1)). Labels and indices need their own.
  std::function<std::vector<float>(size_t bottom, size_t count)> bottom_values;
  std::vector<bool> propagate_down;  // default: every bottom
  bool run_backward = true;
  int forward_passes = 1;        // > 1 checks state carried between passes (running statistics)
  Layout layout = Layout::nchw;  // of every blob, on both devices (nhwc: channels-last)
};

// ||got - want|| / ||want|| in double; a NaN in `got` (an element never written) makes it infinite.
double relative_error(const std::vector<float>& got, const std::vector<float>& want);

// Reports failures through GoogleTest. Call after CREMA_REQUIRE_CUDA().
void check_cuda_parity(const std::string& yaml, const std::vector<Shape>& bottom_shapes,
                       const ParityOptions& options = {});

}  // namespace crema::testing
