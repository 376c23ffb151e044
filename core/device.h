// Device: where a tensor lives and where a kernel runs. "cpu" or "cuda:N".
#pragma once

#include <string>

namespace crema {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {Kind::cuda, index}; }
  // Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws crema::Error naming the text otherwise.
  static Device parse(const std::string& text);

  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

}  // namespace crema
