// Every registered layer type is checked on the GPU against the CPU: a test
// `<Type>LayerCuda.MatchesCpu*`.
#include <gtest/gtest.h>

#include "tests/support/registry_coverage.h"

namespace crema {
namespace {

TEST(LayerRegistryCuda, EveryTypeHasAParityTest) {
  testing::expect_every_layer_tested("LayerCuda", "MatchesCpu", {});
}

}  // namespace
}  // namespace crema
