// Test support: every layer type in the registry must have its own tests.
#pragma once

#include <map>
#include <string>

namespace crema::testing {

// Fails (through GoogleTest) for each registered layer type T without a test in this
// executable whose suite is `T + suite_suffix` and whose name starts with `test_prefix`.
// `exempt` maps types that cannot have such a test to the reason why.
void expect_every_layer_tested(const std::string& suite_suffix, const std::string& test_prefix,
                               const std::map<std::string, std::string>& exempt);

}  // namespace crema::testing
