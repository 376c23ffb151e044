// Every registered layer type has a numerical gradient check: a test `<Type>Layer.Gradient*`.
#include <gtest/gtest.h>

#include "tests/support/registry_coverage.h"

namespace crema {
namespace {

TEST(LayerRegistry, EveryTypeHasAGradientCheck) {
  testing::expect_every_layer_tested("Layer", "Gradient",
                                     {{"Accuracy", "a metric: not differentiable, no backward"}});
}

}  // namespace
}  // namespace crema
