// Elementwise helpers, dispatch: checks the tensors once, then runs the CPU or the CUDA path.
#include "kernels/elementwise/elementwise.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// The bias helpers: `matrix` is [..., N] and `bias` has N elements; returns {M, N}.
std::pair<int64_t, int64_t> bias_extents(const Context& ctx, const char* op,
                                         const char* matrix_name, const Tensor& matrix,
                                         const char* bias_name, const Tensor& bias) {
  check_tensor(ctx, op, matrix_name, matrix, matrix.shape());
  check_tensor(ctx, op, bias_name, bias, bias.shape());
  if (matrix.ndim() < 1 || matrix.dim(-1) != bias.numel()) {
    throw Error(std::string(op) + ": " + bias_name + " " + bias.description() + " does not fit " +
                matrix_name + " " + matrix.description() + " (needs as many elements as " +
                matrix_name + "'s last extent)");
  }
  return {bias.numel() == 0 ? 0 : matrix.numel() / bias.numel(), bias.numel()};
}

}  // namespace

void fill(Context& ctx, Tensor& x, float value) {
  check_tensor(ctx, "fill", "x", x, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::fill(x.numel(), value, x.data<float>(), cuda::MapVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::fill(x.numel(), value, x.data<float>(), ctx.num_threads());
}

void scale(Context& ctx, float alpha, Tensor& x) {
  check_tensor(ctx, "scale", "x", x, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::scale(x.numel(), alpha, x.data<float>(), cuda::MapVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::scale(x.numel(), alpha, x.data<float>(), ctx.num_threads());
}

void axpy(Context& ctx, float alpha, const Tensor& x, Tensor& y) {
  check_tensor(ctx, "axpy", "x", x, x.shape());
  check_tensor(ctx, "axpy", "y", y, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::axpy(x.numel(), alpha, x.data<float>(), y.data<float>(), cuda::MapVersion::best,
               ctx.stream());
    return;
  }
#endif
  cpu::axpy(x.numel(), alpha, x.data<float>(), y.data<float>(), ctx.num_threads());
}

void axpby(Context& ctx, float alpha, const Tensor& x, float beta, Tensor& y) {
  check_tensor(ctx, "axpby", "x", x, x.shape());
  check_tensor(ctx, "axpby", "y", y, x.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::axpby(x.numel(), alpha, x.data<float>(), beta, y.data<float>(), cuda::MapVersion::best,
                ctx.stream());
    return;
  }
#endif
  cpu::axpby(x.numel(), alpha, x.data<float>(), beta, y.data<float>(), ctx.num_threads());
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  check_tensor(ctx, "add", "a", a, a.shape());
  check_tensor(ctx, "add", "b", b, a.shape());
  check_tensor(ctx, "add", "out", out, a.shape());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::add(a.numel(), a.data<float>(), b.data<float>(), out.data<float>(), cuda::MapVersion::best,
              ctx.stream());
    return;
  }
#endif
  cpu::add(a.numel(), a.data<float>(), b.data<float>(), out.data<float>(), ctx.num_threads());
}

void sum(Context& ctx, const Tensor& x, Tensor& out) {
  check_tensor(ctx, "sum", "x", x, x.shape());
  check_scalar(ctx, "sum", "out", out);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const size_t bytes = cuda::sum_workspace_bytes(x.numel());
    void* workspace = bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
    cuda::sum(x.numel(), x.data<float>(), out.data<float>(), workspace, ctx.stream());
    return;
  }
#endif
  out.data<float>()[0] = float(cpu::sum(x.numel(), x.data<float>(), ctx.num_threads()));
}

void sum_of_squares(Context& ctx, const Tensor& x, Tensor& out) {
  check_tensor(ctx, "sum_of_squares", "x", x, x.shape());
  check_scalar(ctx, "sum_of_squares", "out", out);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    const size_t bytes = cuda::sum_workspace_bytes(x.numel());
    void* workspace = bytes > 0 ? ctx.workspace((bytes + 3) / 4) : nullptr;
    cuda::sum_of_squares(x.numel(), x.data<float>(), out.data<float>(), workspace, ctx.stream());
    return;
  }
#endif
  out.data<float>()[0] = float(cpu::sum_of_squares(x.numel(), x.data<float>(), ctx.num_threads()));
}

void add_bias_rows(Context& ctx, const Tensor& bias, Tensor& y) {
  const auto [M, N] = bias_extents(ctx, "add_bias_rows", "y", y, "bias", bias);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::add_bias_rows(M, N, bias.data<float>(), y.data<float>(), ctx.stream());
    return;
  }
#endif
  cpu::add_bias_rows(M, N, bias.data<float>(), y.data<float>(), ctx.num_threads());
}

void accumulate_bias_rows(Context& ctx, const Tensor& dy, Tensor& dbias) {
  const auto [M, N] = bias_extents(ctx, "accumulate_bias_rows", "dy", dy, "dbias", dbias);
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::accumulate_bias_rows(M, N, dy.data<float>(), dbias.data<float>(), cuda::BiasVersion::best,
                               ctx.stream());
    return;
  }
#endif
  cpu::accumulate_bias_rows(M, N, dy.data<float>(), dbias.data<float>(), ctx.num_threads());
}

}  // namespace crema::kernels
