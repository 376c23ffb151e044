// The synthetic run of tests/support/synthetic_data.h with batch mixing: `label` declared as given
// (e.g. "[10]") and data.train.batch_mix set to `batch_mix` (a YAML map, on line 7 of the file).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/synthetic_data.h"

namespace crema::testing {

inline std::string mixing_run(const std::string& dir, const std::string& label,
                              const std::string& batch_mix) {
  write_synthetic_idx(dir, 600, 1);
  std::string text = synthetic_config(dir);
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  };
  replace("label: []", "label: " + label);
  replace("    batch_size: 16\n", "    batch_size: 16\n    batch_mix: " + batch_mix + "\n");
  const std::string config = dir + "/net.yaml";
  write_text(config, text);
  return config;
}

}  // namespace crema::testing
