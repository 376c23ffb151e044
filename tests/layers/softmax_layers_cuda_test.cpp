// Softmax, LogSoftmax, SoftmaxWithLoss with label smoothing, SigmoidCrossEntropyLoss and
// EuclideanLoss on CUDA against the same layers on the CPU (tests/support/layer_parity.h): tops,
// bottom gradients, on shapes that take each kernel path (a thread or a warp per distribution,
// one block or several, the separate label count).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/random.h"
#include "tests/support/cuda_test_util.h"
#include "tests/support/layer_harness.h"
#include "tests/support/layer_parity.h"

namespace crema::testing {
namespace {

struct AxisCase {
  Shape shape;
  int axis;
};

// LeNet's logits, wide rows (the warp version), per-pixel maps, other axes, N = 1.
const std::vector<AxisCase> kAxisCases = {
    {{64, 10}, 1},      {{3, 1000}, 1}, {{2, 3, 4, 5}, 1}, {{2, 3, 4, 5}, 2},
    {{2, 21, 9, 7}, 1}, {{1, 7}, -1},   {{2, 3, 40}, -1},
};

// `keys`: more YAML keys, ", mode: fast" say.
void expect_axis_parity(const std::string& type, const std::string& keys = "") {
  for (const AxisCase& c : kAxisCases) {
    SCOPED_TRACE(type + keys + " " + shape_str(c.shape) + " axis " + std::to_string(c.axis));
    ParityOptions options;
    options.bottom_values = [](size_t, size_t count) { return random_values(count, -6, 6, 3); };
    check_cuda_parity("{name: s, type: " + type + ", axis: " + std::to_string(c.axis) + keys + "}",
                      {c.shape}, options);
  }
}

TEST(SoftmaxLayerCuda, MatchesCpuEveryAxis) {
  CREMA_REQUIRE_CUDA();
  expect_axis_parity("Softmax");
}

TEST(SoftmaxLayerCuda, FastModeMatchesCpuEveryAxis) {
  CREMA_REQUIRE_CUDA();
  expect_axis_parity("Softmax", ", mode: fast");
}

TEST(LogSoftmaxLayerCuda, MatchesCpuEveryAxis) {
  CREMA_REQUIRE_CUDA();
  expect_axis_parity("LogSoftmax");
}

// Class labels for a logits shape with classes at axis 1, every fifth (about) the ignore_label.
std::vector<float> class_labels(size_t count, int64_t classes, uint64_t seed) {
  Random rng(seed);
  std::vector<float> labels(count);
  for (float& l : labels) l = rng.below(5) == 0 ? 255.0f : float(rng.below(uint64_t(classes)));
  return labels;
}

TEST(SoftmaxWithLossLayerCuda, MatchesCpuLabelSmoothing) {
  CREMA_REQUIRE_CUDA();
  struct Case {
    Shape logits, labels;
  };
  // Thread and warp versions, one block and several, the backward's separate label count.
  const std::vector<Case> cases = {
      {{64, 10}, {64}}, {{7, 100}, {7}}, {{2, 5, 7, 9}, {2, 7, 9}}, {{3, 5, 40, 40}, {3, 40, 40}}};
  for (const std::string normalization : {"valid", "batch_size"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(shape_str(c.logits) + " " + normalization);
      ParityOptions options;
      options.propagate_down = {true, false};
      const int64_t classes = c.logits[1];
      options.bottom_values = [classes](size_t bottom, size_t count) {
        return bottom == 0 ? random_values(count, -5, 5, 4) : class_labels(count, classes, 5);
      };
      check_cuda_parity(
          "{name: l, type: SoftmaxWithLoss, ignore_label: 255, label_smoothing: "
          "0.15, normalization: " +
              normalization + "}",
          {c.logits, c.labels}, options);
    }
  }
}

// Targets in [0, 1] with every seventh element (about) the ignore_label -1 when `ignore`.
std::vector<float> targets(size_t count, bool ignore, uint64_t seed) {
  Random rng(seed);
  std::vector<float> t(count);
  for (float& v : t) v = ignore && rng.below(7) == 0 ? -1.0f : float(rng.uniform(0, 1));
  return t;
}

TEST(SigmoidCrossEntropyLossLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  // One element, one block, several blocks (a finishing block), and the backward's target count.
  const std::vector<Shape> shapes = {{1, 1}, {7, 13}, {3, 50, 41}, {64, 1000}};
  for (const std::string yaml :
       {"{name: l, type: SigmoidCrossEntropyLoss}",
        "{name: l, type: SigmoidCrossEntropyLoss, normalization: full}",
        "{name: l, type: SigmoidCrossEntropyLoss, ignore_label: -1, normalization: valid}"}) {
    const bool ignore = yaml.find("ignore_label") != std::string::npos;
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(yaml + " " + shape_str(shape));
      ParityOptions options;
      options.propagate_down = {true, false};
      options.bottom_values = [ignore](size_t bottom, size_t count) {
        return bottom == 0 ? random_values(count, -8, 8, 6) : targets(count, ignore, 7);
      };
      check_cuda_parity(yaml, {shape, shape}, options);
    }
  }
}

TEST(EuclideanLossLayerCuda, MatchesCpu) {
  CREMA_REQUIRE_CUDA();
  const std::vector<Shape> shapes = {{1, 1}, {7, 13}, {3, 50, 41}, {64, 1000}};
  for (const std::string yaml :
       {"{name: l, type: EuclideanLoss}", "{name: l, type: EuclideanLoss, normalization: full}"}) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(yaml + " " + shape_str(shape));
      check_cuda_parity(yaml, {shape, shape});
      ParityOptions one_side;
      one_side.propagate_down = {false, true};
      check_cuda_parity(yaml, {shape, shape}, one_side);
    }
  }
}

}  // namespace
}  // namespace crema::testing
