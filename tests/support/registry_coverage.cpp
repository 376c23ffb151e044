#include "tests/support/registry_coverage.h"

#include <gtest/gtest.h>

#include <set>

#include "layers/register_layers.h"

namespace crema::testing {

void expect_every_layer_tested(const std::string& suite_suffix, const std::string& test_prefix,
                               const std::map<std::string, std::string>& exempt) {
  std::set<std::string> covered;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      if (std::string(suite.GetTestInfo(t)->name()).rfind(test_prefix, 0) == 0) {
        covered.insert(suite.name());
      }
    }
  }
  for (const std::string& type : builtin_layers().types()) {
    if (exempt.count(type) != 0) continue;
    EXPECT_TRUE(covered.count(type + suite_suffix) != 0)
        << "layer type '" << type << "' has no test " << type << suite_suffix << "."
        << test_prefix << "*";
  }
}

}  // namespace crema::testing
