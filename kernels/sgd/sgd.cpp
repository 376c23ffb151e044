// SGD with momentum, dispatch: checks the tensors once, then runs the CPU or the CUDA path.
#include "kernels/sgd/sgd.h"

#include <string>

#include "core/error.h"
#include "kernels/tensor_checks.h"

namespace crema::kernels {

void sgd_momentum_update(Context& ctx, Tensor& w, const Tensor& g, Tensor& v, float lr,
                         float momentum, float weight_decay) {
  const std::string op = "sgd_momentum_update";
  check_tensor(ctx, op, "w", w, w.shape());
  check_tensor(ctx, op, "g", g, w.shape());
  check_tensor(ctx, op, "v", v, w.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::sgd_momentum_update(w.numel(), w.data<float>(), g.data<float>(), v.data<float>(), lr,
                              momentum, weight_decay, ctx.stream());
    return;
  }
#endif
  cpu::sgd_momentum_update(w.numel(), w.data<float>(), g.data<float>(), v.data<float>(), lr,
                           momentum, weight_decay, ctx.num_threads());
}

void sgd_momentum_update_multi(Context& ctx, const std::vector<SgdTensorSet>& sets,
                               float momentum) {
  std::vector<SgdSlice> slices;
  slices.reserve(sets.size());
  for (size_t k = 0; k < sets.size(); ++k) {
    const SgdTensorSet& s = sets[k];
    const std::string op = "sgd_momentum_update_multi (set " + std::to_string(k) + ")";
    if (s.w == nullptr || s.g == nullptr || s.v == nullptr) throw Error(op + ": a tensor is null");
    check_tensor(ctx, op, "w", *s.w, s.w->shape());
    check_tensor(ctx, op, "g", *s.g, s.w->shape());
    check_tensor(ctx, op, "v", *s.v, s.w->shape());
    slices.push_back({s.w->data<float>(), s.g->data<float>(), s.v->data<float>(), s.w->numel(),
                      s.lr, s.weight_decay});
  }
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::sgd_momentum_update_multi(slices.data(), int(slices.size()), momentum,
                                    cuda::SgdVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::sgd_momentum_update_multi(slices.data(), int(slices.size()), momentum, ctx.num_threads());
}

}  // namespace crema::kernels
