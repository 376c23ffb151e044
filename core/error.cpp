#include "core/error.h"

namespace crema {

void internal_error(const char* file, int line, const char* condition,
                    const std::string& message) {
  throw Error("internal error at " + std::string(file) + ":" + std::to_string(line) + ": " +
              condition + " failed: " + message + " (this is a bug in crema; please report it)");
}

}  // namespace crema
