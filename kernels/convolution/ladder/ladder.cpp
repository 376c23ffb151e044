// The convolution ladder: the production table (algorithms.cpp) plus the rungs production never
// picks, kept to teach and to measure (README.md). Built into crema_kernel_ladders, which the
// tests and `crema bench conv` link; `auto` and `find` never see these records.
#include <algorithm>

#include "kernels/convolution/algorithm.h"

namespace crema::kernels {
namespace records {
extern const ConvAlgorithm precomputed_gemm;
}  // namespace records

namespace {

template <bool with_cuda>
std::vector<const ConvAlgorithm*> ladder_rungs() {
  if constexpr (with_cuda) {
    return {
        &records::precomputed_gemm,  // v8
    };
  } else {
    return {};
  }
}

}  // namespace

const std::vector<const ConvAlgorithm*>& conv_ladder() {
  static const std::vector<const ConvAlgorithm*> ladder = [] {
    std::vector<const ConvAlgorithm*> all = conv_algorithms();
    for (const ConvAlgorithm* rung : ladder_rungs<kBuiltWithCuda>()) all.push_back(rung);
    std::stable_sort(all.begin(), all.end(), [](const ConvAlgorithm* a, const ConvAlgorithm* b) {
      return a->rung < b->rung;
    });
    return all;
  }();
  return ladder;
}

}  // namespace crema::kernels
