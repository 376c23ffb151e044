// Dropout, dispatch: checks the tensors, the ratio and the step counter once, then runs the path
// for the device and dtype (float32: cpu:: or cuda::; bf16, f16: cuda::; float64 on the CPU: the
// reference). On the CPU the counter is host memory, read and advanced here; on a GPU it is
// advanced and read by kernels, so nothing waits for the device.
#include "kernels/dropout/dropout.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// What the mask depends on besides the seed: a ratio in [0, 1) and the step counter (f32[2]
// whatever the data's dtype: its 8 bytes are one uint64).
void check_mask(const Context& ctx, const std::string& op, float ratio, const Tensor& step) {
  check_tensor(ctx, op, "step", step, {2});
  if (!(ratio >= 0.0f && ratio < 1.0f)) {
    throw Error(op + ": ratio " + std::to_string(ratio) + " must be in [0, 1)");
  }
}

uint64_t read_host(const Tensor& step) {
  uint64_t value;
  std::memcpy(&value, step.raw(), sizeof value);
  return value;
}

// The host counter, advanced by one: the step this forward draws its mask for.
uint64_t advance_host(Tensor& step) {
  const uint64_t next = read_host(step) + 1;
  std::memcpy(step.raw(), &next, sizeof next);
  return next;
}

}  // namespace

Tensor dropout_step_counter(Context& ctx) {
  static_assert(2 * sizeof(float) == sizeof(uint64_t));
  return ctx.zeros({2});  // all bits zero: the integer 0
}

uint64_t dropout_step_value(const Tensor& step) {
  Tensor host(step.shape());
  host.copy_from(step);
  return read_host(host);
}

void dropout_forward(Context& ctx, const Tensor& x, Tensor& y, float ratio, uint64_t seed,
                     Tensor& step) {
  const char* op = "dropout_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  check_mask(ctx, op, ratio, step);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    uint64_t* counter = static_cast<uint64_t*>(step.raw());
    cuda::dropout_advance(counter, stream);
    cuda::dropout_forward(x.numel(), x.data<T>(), y.data<T>(), ratio, seed, counter,
                          cuda::DropoutVersion::best, stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::dropout_forward(x.numel(), x.data<float>(), y.data<float>(), ratio, seed,
                                         advance_host(step), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::dropout_forward(x.numel(), x.data<double>(), y.data<double>(), ratio, seed,
                                  advance_host(step));
           }));
}

void dropout_backward(Context& ctx, const Tensor& dy, Tensor& dx, float ratio, uint64_t seed,
                      const Tensor& step) {
  const char* op = "dropout_backward";
  const DType dtype = dy.dtype();
  check_tensors(ctx, op, dy.shape(), dtype, {{"dy", dy}, {"dx", dx}});
  check_mask(ctx, op, ratio, step);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::dropout_backward(dy.numel(), dy.data<T>(), dx.data<T>(), ratio, seed,
                           static_cast<const uint64_t*>(step.raw()), cuda::DropoutVersion::best,
                           stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::dropout_backward(dy.numel(), dy.data<float>(), dx.data<float>(), ratio,
                                          seed, read_host(step), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::dropout_backward(dy.numel(), dy.data<double>(), dx.data<double>(), ratio, seed,
                                   read_host(step));
           }));
}

// Rows = dim 0, row_size = the rest: the shape [N, ...] as torchvision's per-sample noise.
void stochastic_depth_forward(Context& ctx, const Tensor& x, Tensor& y, float ratio, uint64_t seed,
                              Tensor& step) {
  const char* op = "stochastic_depth_forward";
  const DType dtype = x.dtype();
  check_tensors(ctx, op, x.shape(), dtype, {{"x", x}, {"y", y}});
  check_mask(ctx, op, ratio, step);
  if (x.ndim() < 1) throw Error(std::string(op) + ": x must have a batch axis, got a scalar");
  const int64_t rows = x.dim(0), row_size = rows == 0 ? 0 : x.numel() / rows;
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    uint64_t* counter = static_cast<uint64_t*>(step.raw());
    cuda::dropout_advance(counter, stream);
    cuda::stochastic_depth(rows, row_size, x.data<T>(), y.data<T>(), ratio, seed, counter, stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::stochastic_depth(rows, row_size, x.data<float>(), y.data<float>(), ratio,
                                          seed, advance_host(step), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::stochastic_depth(rows, row_size, x.data<double>(), y.data<double>(), ratio, seed,
                                   advance_host(step));
           }));
}

void stochastic_depth_backward(Context& ctx, const Tensor& dy, Tensor& dx, float ratio,
                               uint64_t seed, const Tensor& step) {
  const char* op = "stochastic_depth_backward";
  const DType dtype = dy.dtype();
  check_tensors(ctx, op, dy.shape(), dtype, {{"dy", dy}, {"dx", dx}});
  check_mask(ctx, op, ratio, step);
  if (dy.ndim() < 1) throw Error(std::string(op) + ": dy must have a batch axis, got a scalar");
  const int64_t rows = dy.dim(0), row_size = rows == 0 ? 0 : dy.numel() / rows;
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::stochastic_depth(rows, row_size, dy.data<T>(), dx.data<T>(), ratio, seed,
                           static_cast<const uint64_t*>(step.raw()), stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::stochastic_depth(rows, row_size, dy.data<float>(), dx.data<float>(), ratio,
                                          seed, read_host(step), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::stochastic_depth(rows, row_size, dy.data<double>(), dx.data<double>(), ratio,
                                   seed, read_host(step));
           }));
}

}  // namespace crema::kernels
