// Errors a user can act on.
//
// crema::Error is thrown for anything a user caused (a bad config, a missing file, a shape that
// cannot work). Its message names the place: `file:line:col`, the layer, or the tensor. The
// `crema` command catches it, prints one line and exits with code 2. Internal invariants that only
// a bug in crema can break use CREMA_CHECK, which also throws (so tests can see it) but says so.
#pragma once

#include <stdexcept>
#include <string>

namespace crema {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Thrown for a failure of the device itself (out of memory, a failed kernel). Same exit code.
class DeviceError : public Error {
 public:
  explicit DeviceError(const std::string& message) : Error(message) {}
};

[[noreturn]] void internal_error(const char* file, int line, const char* condition,
                                 const std::string& message);

}  // namespace crema

// CREMA_CHECK(cond, message): an internal invariant. A failure is a bug in crema, not user error.
#define CREMA_CHECK(cond, message)                                     \
  do {                                                                 \
    if (!(cond)) ::crema::internal_error(__FILE__, __LINE__, #cond, (message)); \
  } while (0)
