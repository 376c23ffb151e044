// The `--set key=value` overrides: each line of the input is one override, applied to a small
// model config as `crema train model.yaml --set ...` applies it (dotted keys, list indices, layer
// names, `+key` to add, `++key` to replace a subtree). Either the merged tree or crema::Error.
#include <algorithm>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

constexpr char kBase[] = R"(name: fuzz
model:
  layers:
    - {name: data, type: Input, top: data, shape: [2, 1, 8, 8]}
    - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 4, kernel_size: 3}
    - {name: ip1, type: InnerProduct, bottom: conv1, top: ip1, num_output: [10]}
solver: {type: SGD, base_lr: 0.01, max_iter: 10}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string base = crema::fuzz::write_input(reinterpret_cast<const uint8_t*>(kBase),
                                                           sizeof(kBase) - 1, "base.yaml");
  std::vector<std::string> overrides;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    overrides.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  try {
    crema::load_config(base, overrides).to_yaml();
  } catch (const crema::Error&) {
  }
  return 0;
}
