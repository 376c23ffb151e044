// Unscaling gradients, dispatch: checks every gradient and the flag once (float32 on the
// context's device), then runs the CPU path (which sets the host flag) or the CUDA one.
#include "kernels/optimizers/grad_unscale.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {

void unscale_gradients(Context& ctx, const std::vector<Tensor*>& grads, float inv_scale,
                       Tensor& found_inf) {
  const char* op = "unscale_gradients";
  if (!(std::isfinite(inv_scale) && inv_scale > 0.0f)) {
    throw Error(std::string(op) + ": inv_scale is " + std::to_string(inv_scale) +
                ", must be finite and > 0");
  }
  check_scalar(ctx, op, "found_inf", found_inf);
  std::vector<GradientSlice> slices;
  slices.reserve(grads.size());
  for (size_t k = 0; k < grads.size(); ++k) {
    const std::string name = "gradient " + std::to_string(k);
    if (grads[k] == nullptr) throw Error(std::string(op) + ": " + name + " is null");
    check_tensor(ctx, op, name.c_str(), *grads[k], grads[k]->shape());
    slices.push_back({grads[k]->data<float>(), grads[k]->numel()});
  }
  dispatch(ctx, op, DType::f32,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::unscale_gradients(slices.data(), int(slices.size()), inv_scale,
                                             found_inf.data<float>(), stream);
                   }),
           on_cpu(DType::f32, [&] {
             if (cpu::unscale_gradients(slices.data(), int(slices.size()), inv_scale,
                                        ctx.num_threads())) {
               *found_inf.data<float>() = 1.0f;
             }
           }));
}

}  // namespace crema::kernels
