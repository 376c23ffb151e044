// Shared by the loss tests (loss_test.cpp on the CPU, loss_cuda_test.cpp, and the cross-entropy's
// in softmax_test.cpp): the normalizations, the targets, float64 tensors, and what ref<double>
// says a normalized sigmoid cross-entropy is.
#pragma once

#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "kernels/loss/loss.h"
#include "tests/kernels/kernel_test_util.h"

namespace crema::kernels::loss_testing {

const LossNormalization kModes[] = {LossNormalization::valid, LossNormalization::batch_size,
                                    LossNormalization::full, LossNormalization::none};

// A float64 tensor on the CPU holding `values` (the Tensor-level float64 path).
inline Tensor f64_tensor(const Shape& shape, const std::vector<double>& values) {
  Tensor t(shape, DType::f64);
  for (size_t i = 0; i < values.size(); ++i) t.data<double>()[i] = values[i];
  return t;
}

// Targets in [0, 1), every fifth (about) the ignore_label 255.
inline std::vector<float> targets(Random& rng, int64_t n) {
  std::vector<float> t = testing::random_values(rng, n, 0, 1);
  for (float& v : t) v = rng.below(5) == 0 ? 255.0f : v;
  return t;
}

// The ignore_label 255 (when `ignore`; otherwise the 255 targets are plain, large targets).
inline SigmoidCrossEntropyOptions sigmoid_options(bool ignore, LossNormalization mode) {
  SigmoidCrossEntropyOptions options;
  options.has_ignore_label = ignore;
  options.ignore_label = 255;
  options.normalization = mode;
  return options;
}

struct SigmoidExpected {
  double loss;             // the sum over counted elements / normalizer
  std::vector<double> dx;  // with the factor top_grad / normalizer
};

inline SigmoidExpected sigmoid_expected(int64_t outer, int64_t inner, const std::vector<double>& x,
                                        const std::vector<double>& t,
                                        const SigmoidCrossEntropyOptions& options,
                                        double top_grad) {
  const int64_t n = outer * inner;
  int64_t counted = 0;
  const double sum = ref::sigmoid_cross_entropy_forward(n, x.data(), t.data(), options, &counted);
  const double normalizer = double(loss_normalizer(options.normalization, outer, inner, counted));
  SigmoidExpected e{sum / normalizer, std::vector<double>(static_cast<size_t>(n))};
  ref::sigmoid_cross_entropy_backward(n, x.data(), t.data(), options, top_grad / normalizer,
                                      e.dx.data());
  return e;
}

}  // namespace crema::kernels::loss_testing
