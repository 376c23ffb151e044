// Test support: the message of the crema::Error a piece of code throws, and a check that a text
// holds a part (errors are for users: they must name the file, the layer, the key, the fix).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace crema::testing {

// The message of the crema::Error that `body` throws; a test failure and "" when it throws none.
template <class F>
std::string error_of(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no crema::Error thrown";
  return "";
}

}  // namespace crema::testing

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks '" << (part) << "'"
