// Optimizer updates, dispatch: names the rules' state, checks every set's tensors once (float32:
// the update's slices are float pointers), then runs the CPU or the CUDA path.
#include "kernels/optimizers/optimizers.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {

std::string optimizer_slot_name(const OptimizerRule& rule, int slot) {
  switch (rule.type) {
    case OptimizerType::sgd:  // Caffe's history, kept only with momentum
    case OptimizerType::nesterov:
      return slot == 0 && rule.momentum > 0 ? "momentum_buffer" : "";
    case OptimizerType::adam:
    case OptimizerType::adamw:
      return slot == 0 ? "exp_avg" : slot == 1 ? "exp_avg_sq" : "";
    case OptimizerType::rmsprop:
      if (slot == 0) return "square_avg";
      if (slot == 1 && rule.momentum > 0) return "momentum_buffer";
      if (slot == 2 && rule.centered) return "grad_avg";
      return "";
    case OptimizerType::adagrad:
      return slot == 0 ? "sum" : "";
  }
  return "";
}

float optimizer_slot_initial_value(const OptimizerRule& rule, int slot) {
  return rule.type == OptimizerType::adagrad && slot == 0 ? float(rule.initial_accumulator_value)
                                                          : 0.0f;
}

void optimizer_update(Context& ctx, const OptimizerRule& rule, int64_t step,
                      const std::vector<OptimizerTensorSet>& sets, GradientScaling scaling) {
  if (step < 1) throw Error("optimizer_update: step is " + std::to_string(step) + ", must be >= 1");
  std::vector<OptimizerSlice> slices;
  slices.reserve(sets.size());
  for (size_t k = 0; k < sets.size(); ++k) {
    const OptimizerTensorSet& s = sets[k];
    const std::string op = "optimizer_update (set " + std::to_string(k) + ")";
    if (s.w == nullptr || s.g == nullptr) throw Error(op + ": w or g is null");
    check_tensor(ctx, op, "w", *s.w, s.w->shape());
    check_tensor(ctx, op, "g", *s.g, s.w->shape());
    OptimizerSlice slice{s.w->data<float>(), s.g->data<float>(), {}, s.w->numel(), s.lr,
                         s.weight_decay};
    for (int j = 0; j < kMaxOptimizerSlots; ++j) {
      const std::string name = optimizer_slot_name(rule, j);
      if (name.empty() != (s.state[j] == nullptr)) {
        throw Error(op + ": state slot " + std::to_string(j) +
                    (name.empty() ? " is unused" : " (" + name + ") is missing") +
                    " for this rule");
      }
      if (name.empty()) continue;
      check_tensor(ctx, op, name.c_str(), *s.state[j], s.w->shape());
      slice.state[j] = s.state[j]->data<float>();
    }
    slices.push_back(slice);
  }
  // float32 only: the float64 references are per rule (ref::sgd_update, ...), not per set.
  dispatch(ctx, "optimizer_update", DType::f32,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     void* workspace =
                         workspace_for(ctx, cuda::optimizer_workspace_bytes(
                                                slices.data(), int(slices.size()), scaling));
                     cuda::optimizer_update(slices.data(), int(slices.size()), rule, step, scaling,
                                            workspace, cuda::OptimizerVersion::best, stream);
                   }),
           on_cpu(DType::f32, [&] {
             cpu::optimizer_update(slices.data(), int(slices.size()), rule, step, scaling,
                                   ctx.num_threads());
           }));
}

}  // namespace crema::kernels
