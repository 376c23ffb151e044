#include "core/device.h"

#include <cctype>

#include "core/error.h"

namespace crema {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  const std::string prefix = "cuda:";
  if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0) {
    const std::string digits = text.substr(prefix.size());
    bool all_digits = digits.size() <= 4;
    for (char c : digits) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
    if (all_digits) return cuda(std::stoi(digits));
  }
  throw Error("unknown device '" + text + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace crema
