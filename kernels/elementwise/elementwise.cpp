// Elementwise helpers, dispatch: checks the tensors once, then runs the path for the device and
// dtype (float32: cpu:: or cuda::; float64 on the CPU: the reference, for gradient checks).
#include "kernels/elementwise/elementwise.h"

#include <string>
#include <utility>
#include <vector>

#include "core/build_config.h"
#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"

namespace crema::kernels {
namespace {

// The bias helpers: `matrix` is [..., N] and `bias` has N elements of `bias_dtype`; returns {M, N}.
std::pair<int64_t, int64_t> bias_extents(const Context& ctx, const char* op,
                                         const char* matrix_name, const Tensor& matrix,
                                         const char* bias_name, const Tensor& bias,
                                         DType bias_dtype) {
  check_tensor(ctx, op, matrix_name, matrix, matrix.shape(), matrix.dtype());
  check_tensor(ctx, op, bias_name, bias, bias.shape(), bias_dtype);
  if (matrix.ndim() < 1 || matrix.dim(-1) != bias.numel()) {
    throw Error(std::string(op) + ": " + bias_name + " " + bias.description() + " does not fit " +
                matrix_name + " " + matrix.description() + " (needs as many elements as " +
                matrix_name + "'s last extent)");
  }
  return {bias.numel() == 0 ? 0 : matrix.numel() / bias.numel(), bias.numel()};
}

// The device scratch of the CUDA sums (none for small n), from the context's workspace. Generic
// in the stream, as the CUDA lambdas are, so that only a CUDA build compiles it.
template <class Stream>
void* sum_workspace(Context& ctx, int64_t n, Stream) {
  return workspace_for(ctx, cuda::sum_workspace_bytes(n));
}

// accumulate_bias_rows_workspace_bytes on CUDA: a template, so that a build without CUDA never
// instantiates the call.
template <bool with_cuda>
size_t cuda_bias_workspace_bytes(int64_t M, int64_t N) {
  if constexpr (with_cuda) {
    return cuda::accumulate_bias_rows_workspace(M, N) * sizeof(float);
  } else {
    return 0;
  }
}

}  // namespace

void fill(Context& ctx, Tensor& x, float value) {
  const DType dtype = x.dtype();
  check_tensor(ctx, "fill", "x", x, x.shape(), dtype);
  const int64_t n = x.numel();
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::fill(n, value, x.data<T>(), cuda::MapVersion::best, stream);
  };
  dispatch(ctx, "fill", dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32, [&] { cpu::fill(n, value, x.data<float>(), ctx.num_threads()); }),
           on_cpu(DType::f64, [&] { ref::fill(n, double(value), x.data<double>()); }));
}

void scale(Context& ctx, float alpha, Tensor& x) {
  const DType dtype = x.dtype();
  check_tensor(ctx, "scale", "x", x, x.shape(), dtype);
  const int64_t n = x.numel();
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::scale(n, alpha, x.data<T>(), cuda::MapVersion::best, stream);
  };
  dispatch(ctx, "scale", dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32, [&] { cpu::scale(n, alpha, x.data<float>(), ctx.num_threads()); }),
           on_cpu(DType::f64, [&] { ref::scale(n, double(alpha), x.data<double>()); }));
}

void axpy(Context& ctx, float alpha, const Tensor& x, Tensor& y) {
  const DType dtype = x.dtype();
  check_tensors(ctx, "axpy", x.shape(), dtype, {{"x", x}, {"y", y}});
  const int64_t n = x.numel();
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::axpy(n, alpha, x.data<T>(), y.data<T>(), cuda::MapVersion::best, stream);
  };
  dispatch(
      ctx, "axpy", dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
      on_cuda_typed<f16_t>(gpu),
      on_cpu(DType::f32,
             [&] { cpu::axpy(n, alpha, x.data<float>(), y.data<float>(), ctx.num_threads()); }),
      on_cpu(DType::f64, [&] { ref::axpy(n, double(alpha), x.data<double>(), y.data<double>()); }));
}

void axpby(Context& ctx, float alpha, const Tensor& x, float beta, Tensor& y) {
  const DType dtype = x.dtype();
  check_tensors(ctx, "axpby", x.shape(), dtype, {{"x", x}, {"y", y}});
  const int64_t n = x.numel();
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::axpby(n, alpha, x.data<T>(), beta, y.data<T>(), cuda::MapVersion::best, stream);
  };
  dispatch(ctx, "axpby", dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::axpby(n, alpha, x.data<float>(), beta, y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::axpby(n, double(alpha), x.data<double>(), double(beta), y.data<double>());
           }));
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  const DType dtype = a.dtype();
  check_tensors(ctx, "add", a.shape(), dtype, {{"a", a}, {"b", b}, {"out", out}});
  const int64_t n = a.numel();
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::add(n, a.data<T>(), b.data<T>(), out.data<T>(), cuda::MapVersion::best, stream);
  };
  dispatch(ctx, "add", dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::add(n, a.data<float>(), b.data<float>(), out.data<float>(),
                             ctx.num_threads());
                  }),
           on_cpu(DType::f64,
                  [&] { ref::add(n, a.data<double>(), b.data<double>(), out.data<double>()); }));
}

void sum(Context& ctx, const Tensor& x, Tensor& out) {
  const DType dtype = x.dtype();
  check_tensor(ctx, "sum", "x", x, x.shape(), dtype);
  check_scalar(ctx, "sum", "out", out, dtype);
  const int64_t n = x.numel();
  dispatch(ctx, "sum", dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::sum(n, x.data<float>(), out.data<float>(), sum_workspace(ctx, n, stream),
                               stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    out.data<float>()[0] = float(cpu::sum(n, x.data<float>(), ctx.num_threads()));
                  }),
           on_cpu(DType::f64, [&] { out.data<double>()[0] = ref::sum(n, x.data<double>()); }));
}

void sum_of_squares(Context& ctx, const Tensor& x, Tensor& out) {
  const DType dtype = x.dtype();
  check_tensor(ctx, "sum_of_squares", "x", x, x.shape(), dtype);
  check_scalar(ctx, "sum_of_squares", "out", out, dtype);
  const int64_t n = x.numel();
  dispatch(ctx, "sum_of_squares", dtype,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::sum_of_squares(n, x.data<float>(), out.data<float>(),
                                          sum_workspace(ctx, n, stream), stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    out.data<float>()[0] =
                        float(cpu::sum_of_squares(n, x.data<float>(), ctx.num_threads()));
                  }),
           on_cpu(DType::f64,
                  [&] { out.data<double>()[0] = ref::sum_of_squares(n, x.data<double>()); }));
}

void add_bias_rows(Context& ctx, const Tensor& bias, Tensor& y) {
  const auto [M, N] = bias_extents(ctx, "add_bias_rows", "y", y, "bias", bias, y.dtype());
  dispatch(ctx, "add_bias_rows", y.dtype(),
           on_cuda(DType::f32,
                   [&, M = M, N = N](auto stream) {
                     cuda::add_bias_rows(M, N, bias.data<float>(), y.data<float>(), stream);
                   }),
           on_cpu(DType::f32,
                  [&, M = M, N = N] {
                    cpu::add_bias_rows(M, N, bias.data<float>(), y.data<float>(),
                                       ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&, M = M, N = N] {
             ref::add_bias_rows(M, N, bias.data<double>(), y.data<double>());
           }));
}

void accumulate_bias_rows(Context& ctx, const Tensor& dy, Tensor& dbias) {
  // 16-bit dy: an f32 dbias, fp32 sums.
  const bool half = dy.dtype() == DType::bf16 || dy.dtype() == DType::f16;
  const auto [M, N] = bias_extents(ctx, "accumulate_bias_rows", "dy", dy, "dbias", dbias,
                                   half ? DType::f32 : dy.dtype());
  const auto half_cuda = [&, M = M, N = N](auto element, auto stream) {
    using T = decltype(element);
    auto* workspace =
        static_cast<float*>(workspace_for(ctx, cuda::accumulate_bias_rows_workspace(M, N) * 4));
    cuda::accumulate_bias_rows_16bit<T>(M, N, dy.data<T>(), dbias.data<float>(), workspace, stream);
  };
  // The CPU's 16-bit path (tests): each column's rows in order, widened exactly, fp32 sums.
  const auto half_cpu = [&, M = M, N = N] {
    const std::vector<float> values = dy.to_vector();
    float* db = dbias.data<float>();
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t m = 0; m < M; ++m) acc += values[size_t(m * N + n)];
      db[n] += acc;
    }
  };
  dispatch(ctx, "accumulate_bias_rows", dy.dtype(), on_cuda_typed<bf16_t>(half_cuda),
           on_cuda_typed<f16_t>(half_cuda), on_cpu(DType::bf16, half_cpu),
           on_cpu(DType::f16, half_cpu),
           on_cuda(DType::f32,
                   [&, M = M, N = N](auto stream) {
                     cuda::accumulate_bias_rows(M, N, dy.data<float>(), dbias.data<float>(),
                                                cuda::BiasVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&, M = M, N = N] {
                    cpu::accumulate_bias_rows(M, N, dy.data<float>(), dbias.data<float>(),
                                              ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&, M = M, N = N] {
             ref::accumulate_bias_rows(M, N, dy.data<double>(), dbias.data<double>());
           }));
}

size_t accumulate_bias_rows_workspace_bytes(const Device& device, int64_t M, int64_t N,
                                            DType dy_dtype) {
  if (!device.is_cuda() || (dy_dtype != DType::bf16 && dy_dtype != DType::f16)) return 0;
  return cuda_bias_workspace_bytes<kBuiltWithCuda>(M, N);
}

}  // namespace crema::kernels
