#include "apps/training/divergence.h"

#include <cmath>
#include <cstdlib>

#include "kernels/elementwise/elementwise.h"

namespace crema::training {

bool NonfiniteCheck::finite(const std::vector<Param*>& params, const Tensor& loss_sum) {
  if (!grad_flag_.defined()) grad_sum_ = ctx_.zeros({}), grad_flag_ = ctx_.zeros({});
  ctx_.fill(grad_flag_, 0.0f);
  for (const Param* p : params) {
    if (p->frozen()) continue;
    kernels::sum(ctx_, p->grad, grad_sum_);
    kernels::axpy(ctx_, 1.0f, grad_sum_, grad_flag_);
  }
  return std::isfinite(loss_sum.to_vector()[0]) && std::isfinite(grad_flag_.to_vector()[0]);
}

void NonfiniteCheck::keep_buffers(const std::vector<Buffer*>& buffers) {
  kept_.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!kept_[i].defined()) {
      kept_[i] = ctx_.empty(buffers[i]->value.shape(), buffers[i]->value.dtype());
    }
    ctx_.copy(kept_[i], buffers[i]->value);
  }
}

void NonfiniteCheck::restore_buffers(const std::vector<Buffer*>& buffers) {
  for (size_t i = 0; i < buffers.size(); ++i) ctx_.copy(buffers[i]->value, kept_[i]);
}

std::string diagnose_nonfinite(Net& net, Context& ctx) {
  const std::string grad = net.first_nonfinite_grad();
  const std::string value = net.first_nonfinite_param();
  const std::string layer = net.first_nonfinite_layer(ctx);
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (!layer.empty())
    add("layer '" + layer + "' is the first whose output is not finite (forward)");
  if (!grad.empty()) add(grad + " is the first parameter whose gradient is not finite (backward)");
  if (!value.empty()) add(value + " is the first parameter whose value is not finite");
  return text.empty() ? "the same batch now runs forward finite" : text;
}

TrainingState restore_checkpoint(const std::string& dir, Net& net, Solver& solver, Context& ctx) {
  const Checkpoint saved = read_checkpoint(dir);
  restore_exactly(net_tensors(net), saved.model, dir + "/model.safetensors", "the model");
  restore_exactly(solver.state(net.learnable_params(), ctx), saved.solver,
                  dir + "/solver.safetensors", "the solver");
  restore_exactly(layer_state(net), saved.layers, dir + "/layers.safetensors",
                  "the layers' run state");
  ctx.random().set_state(saved.state.rng);
  return saved.state;
}

NanInjection::NanInjection(const char* at, const char* times) {
  if (const char* value = std::getenv(at)) iteration_ = std::atoll(value);
  const char* count = std::getenv(times);
  times_left_ = count ? std::atoll(count) : 1;
}

bool NanInjection::due(int64_t iteration) {
  if (iteration != iteration_ || times_left_ == 0) return false;
  --times_left_;
  return true;
}

}  // namespace crema::training
