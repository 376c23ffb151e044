// Optimizer updates, fast CPU path: one loop per parameter that reads w, g and the state once,
// writes them once and zeroes g (Caffe does the same work in four passes: regularize, update the
// history, copy it to the diff, subtract), instantiated per rule so that it vectorizes, threaded
// for large parameters. The clipping norm uses cpu::sum_of_squares (kernels/elementwise): fixed
// blocks added in order, so the factor does not depend on the thread count.
#include <algorithm>

#include "kernels/elementwise/elementwise.h"
#include "kernels/optimizers/optimizer_rules.h"
#include "kernels/optimizers/optimizers.h"

namespace crema::kernels::cpu {
namespace {

// Below this many elements one thread is faster: a parallel region costs a few microseconds.
constexpr int64_t kParallelElements = 1 << 16;

template <class R>
void update_slice(const OptimizerSlice& s, const rules::RuleConstants& r,
                  const rules::ParamConstants& p, float scale, int num_threads) {
  float* __restrict__ w = s.w;
  float* __restrict__ g = s.g;
  float* __restrict__ a = s.state[0];
  float* __restrict__ b = s.state[1];
  float* __restrict__ c = s.state[2];
  const int64_t n = s.n;
#pragma omp parallel for simd schedule(static) \
    num_threads(std::max(1, num_threads)) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    float wi = w[i], s0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    if constexpr (R::slot0) s0 = a[i];
    if constexpr (R::slot1) s1 = b[i];
    if constexpr (R::slot2) s2 = c[i];
    rules::update_element<R>(r, p, g[i] * scale, wi, s0, s1, s2);
    w[i] = wi;
    if constexpr (R::slot0) a[i] = s0;
    if constexpr (R::slot1) b[i] = s1;
    if constexpr (R::slot2) c[i] = s2;
    g[i] = 0.0f;
  }
}

}  // namespace

void optimizer_update(const OptimizerSlice* slices, int count, const OptimizerRule& rule,
                      int64_t step, GradientScaling scaling, int num_threads) {
  double sum_of_squares = 0.0;
  if (scaling.max_norm > 0.0f) {
    for (int k = 0; k < count; ++k) {
      sum_of_squares += cpu::sum_of_squares(slices[k].n, slices[k].g, num_threads);
    }
  }
  const float scale = rules::gradient_scale(sum_of_squares, scaling.multiplier, scaling.max_norm);
  const rules::RuleConstants constants = rules::rule_constants(rule, step);
  rules::with_rule(rule, [&](auto r) {
    for (int k = 0; k < count; ++k) {
      const OptimizerSlice& s = slices[k];
      update_slice<decltype(r)>(s, constants,
                                rules::param_constants(rule, step, s.lr, s.weight_decay), scale,
                                num_threads);
    }
  });
}

}  // namespace crema::kernels::cpu
