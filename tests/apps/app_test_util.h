// What the tests of the `crema` command share: the running test's name (each test gets its own
// directory: ctest runs tests in parallel processes), a synthetic training set with the config
// that trains on it, and variants of that config.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/synthetic_data.h"

namespace crema::testing {

inline std::string test_name() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// Writes `samples` synthetic images (drawn with `seed`) into `dir` and the config that trains on
// them as dir/net.yaml; returns that path.
inline std::string write_synthetic_run(const std::string& dir, int samples, unsigned seed) {
  write_synthetic_idx(dir, samples, seed);
  const std::string config = dir + "/net.yaml";
  write_text(config, synthetic_config(dir));
  return config;
}

// Writes `text` with its first `from` replaced by `to` as dir/variant.yaml; returns that path.
inline std::string write_variant(const std::string& dir, std::string text, const std::string& from,
                                 const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  const std::string path = dir + "/variant.yaml";
  write_text(path, text);
  return path;
}

// Sets an environment variable for the object's lifetime (test hooks such as CREMA_TEST_NAN_AT
// are read when a training run starts).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace crema::testing
