// Eltwise, dispatch: checks that every input has y's shape, then runs the CPU or the CUDA path.
#include "kernels/elementwise/eltwise.h"

#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// The inputs' data pointers, after checking each is a float32 tensor of `shape` on the device.
std::vector<const float*> checked_inputs(const Context& ctx, const char* op,
                                         const std::vector<const Tensor*>& x, const Shape& shape) {
  if (x.empty()) throw Error(std::string(op) + ": no inputs");
  std::vector<const float*> pointers;
  for (size_t j = 0; j < x.size(); ++j) {
    const std::string name = "x[" + std::to_string(j) + "]";
    if (x[j] == nullptr) throw Error(std::string(op) + ": " + name + " is missing");
    check_tensor(ctx, op, name.c_str(), *x[j], shape);
    pointers.push_back(x[j]->data<float>());
  }
  return pointers;
}

void check_index(const char* op, int i, size_t K) {
  if (i < 0 || size_t(i) >= K) {
    throw Error(std::string(op) + ": input index " + std::to_string(i) + " is not in [0, " +
                std::to_string(K) + ")");
  }
}

}  // namespace

void eltwise_sum(Context& ctx, const std::vector<const Tensor*>& x, const std::vector<float>& coeff,
                 Tensor& y) {
  check_tensor(ctx, "eltwise_sum", "y", y, y.shape());
  const std::vector<const float*> in = checked_inputs(ctx, "eltwise_sum", x, y.shape());
  if (coeff.size() != x.size()) {
    throw Error("eltwise_sum: " + std::to_string(coeff.size()) + " coefficients for " +
                std::to_string(x.size()) + " inputs");
  }
  const int K = int(x.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::eltwise_sum(y.numel(), K, in.data(), coeff.data(), y.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::eltwise_sum(y.numel(), K, in.data(), coeff.data(), y.data<float>(), ctx.num_threads());
}

void eltwise_prod(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  check_tensor(ctx, "eltwise_prod", "y", y, y.shape());
  const std::vector<const float*> in = checked_inputs(ctx, "eltwise_prod", x, y.shape());
  const int K = int(x.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::eltwise_prod(y.numel(), K, in.data(), y.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::eltwise_prod(y.numel(), K, in.data(), y.data<float>(), ctx.num_threads());
}

void eltwise_prod_backward(Context& ctx, const std::vector<const Tensor*>& x, int i,
                           const Tensor& dy, Tensor& dx) {
  const char* op = "eltwise_prod_backward";
  check_tensor(ctx, op, "dy", dy, dy.shape());
  check_tensor(ctx, op, "dx", dx, dy.shape());
  const std::vector<const float*> in = checked_inputs(ctx, op, x, dy.shape());
  check_index(op, i, x.size());
  const int K = int(x.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::eltwise_prod_backward(dy.numel(), K, in.data(), i, dy.data<float>(), dx.data<float>(),
                                ctx.stream());
    return;
  }
#endif
  cpu::eltwise_prod_backward(dy.numel(), K, in.data(), i, dy.data<float>(), dx.data<float>(),
                             ctx.num_threads());
}

void eltwise_max(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y, Tensor& argmax) {
  check_tensor(ctx, "eltwise_max", "y", y, y.shape());
  check_tensor(ctx, "eltwise_max", "argmax", argmax, y.shape());
  const std::vector<const float*> in = checked_inputs(ctx, "eltwise_max", x, y.shape());
  const int K = int(x.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::eltwise_max(y.numel(), K, in.data(), y.data<float>(), argmax.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::eltwise_max(y.numel(), K, in.data(), y.data<float>(), argmax.data<float>(),
                   ctx.num_threads());
}

void eltwise_max_backward(Context& ctx, const Tensor& dy, const Tensor& argmax, int i, Tensor& dx) {
  const char* op = "eltwise_max_backward";
  check_tensor(ctx, op, "dy", dy, dy.shape());
  check_tensor(ctx, op, "argmax", argmax, dy.shape());
  check_tensor(ctx, op, "dx", dx, dy.shape());
  if (i < 0) throw Error(std::string(op) + ": negative input index " + std::to_string(i));
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::eltwise_max_backward(dy.numel(), i, dy.data<float>(), argmax.data<float>(),
                               dx.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::eltwise_max_backward(dy.numel(), i, dy.data<float>(), argmax.data<float>(), dx.data<float>(),
                            ctx.num_threads());
}

}  // namespace crema::kernels
