// Eltwise, dispatch: checks that every input has y's shape, then runs the path for the device and
// dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the CPU: the reference, for
// gradient checks).
#include "kernels/elementwise/eltwise.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// Checks that every input is a `dtype` tensor of `shape` on the device.
void check_inputs(const Context& ctx, const char* op, const std::vector<const Tensor*>& x,
                  const Shape& shape, DType dtype) {
  if (x.empty()) throw Error(std::string(op) + ": no inputs");
  for (size_t j = 0; j < x.size(); ++j) {
    const std::string name = "x[" + std::to_string(j) + "]";
    if (x[j] == nullptr) throw Error(std::string(op) + ": " + name + " is missing");
    check_tensor(ctx, op, name.c_str(), *x[j], shape, dtype);
  }
}

// The inputs' data pointers, of checked T tensors.
template <class T>
std::vector<const T*> pointers(const std::vector<const Tensor*>& x) {
  std::vector<const T*> p;
  for (const Tensor* t : x) p.push_back(t->data<T>());
  return p;
}

void check_index(const char* op, int i, size_t K) {
  if (i < 0 || size_t(i) >= K) {
    throw Error(std::string(op) + ": input index " + std::to_string(i) + " is not in [0, " +
                std::to_string(K) + ")");
  }
}

// argmax holds input indices in the tensors' dtype: exact up to 256 in bf16, 2048 in f16.
void check_index_capacity(const char* op, int K, DType dtype) {
  const int most = dtype == DType::bf16 ? 256 : (dtype == DType::f16 ? 2048 : 1 << 24);
  if (K > most) {
    throw Error(std::string(op) + ": " + std::to_string(K) + " inputs, but a " + dtype_name(dtype) +
                " argmax holds input indices exactly only up to " + std::to_string(most));
  }
}

}  // namespace

void eltwise_sum(Context& ctx, const std::vector<const Tensor*>& x, const std::vector<float>& coeff,
                 Tensor& y) {
  const char* op = "eltwise_sum";
  const DType dtype = y.dtype();
  check_tensor(ctx, op, "y", y, y.shape(), dtype);
  check_inputs(ctx, op, x, y.shape(), dtype);
  if (coeff.size() != x.size()) {
    throw Error("eltwise_sum: " + std::to_string(coeff.size()) + " coefficients for " +
                std::to_string(x.size()) + " inputs");
  }
  const int K = int(x.size());
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::eltwise_sum(y.numel(), K, pointers<T>(x).data(), coeff.data(), y.data<T>(), stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::eltwise_sum(y.numel(), K, pointers<float>(x).data(), coeff.data(),
                                     y.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             const std::vector<double> c(coeff.begin(), coeff.end());
             ref::eltwise_sum(y.numel(), K, pointers<double>(x).data(), c.data(), y.data<double>());
           }));
}

void eltwise_prod(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) {
  const char* op = "eltwise_prod";
  const DType dtype = y.dtype();
  check_tensor(ctx, op, "y", y, y.shape(), dtype);
  check_inputs(ctx, op, x, y.shape(), dtype);
  const int K = int(x.size());
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::eltwise_prod(y.numel(), K, pointers<T>(x).data(), y.data<T>(), stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::eltwise_prod(y.numel(), K, pointers<float>(x).data(), y.data<float>(),
                                      ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::eltwise_prod(y.numel(), K, pointers<double>(x).data(), y.data<double>());
           }));
}

void eltwise_prod_backward(Context& ctx, const std::vector<const Tensor*>& x, int i,
                           const Tensor& dy, Tensor& dx) {
  const char* op = "eltwise_prod_backward";
  const DType dtype = dy.dtype();
  check_tensors(ctx, op, dy.shape(), dtype, {{"dy", dy}, {"dx", dx}});
  check_inputs(ctx, op, x, dy.shape(), dtype);
  check_index(op, i, x.size());
  const int K = int(x.size());
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::eltwise_prod_backward(dy.numel(), K, pointers<T>(x).data(), i, dy.data<T>(), dx.data<T>(),
                                stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::eltwise_prod_backward(dy.numel(), K, pointers<float>(x).data(), i,
                                               dy.data<float>(), dx.data<float>(),
                                               ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::eltwise_prod_backward(dy.numel(), K, pointers<double>(x).data(), i,
                                        dy.data<double>(), dx.data<double>());
           }));
}

void eltwise_max(Context& ctx, const std::vector<const Tensor*>& x, Tensor& y, Tensor& argmax) {
  const char* op = "eltwise_max";
  const DType dtype = y.dtype();
  check_tensors(ctx, op, y.shape(), dtype, {{"y", y}, {"argmax", argmax}});
  check_inputs(ctx, op, x, y.shape(), dtype);
  const int K = int(x.size());
  check_index_capacity(op, K, dtype);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::eltwise_max(y.numel(), K, pointers<T>(x).data(), y.data<T>(), argmax.data<T>(), stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::eltwise_max(y.numel(), K, pointers<float>(x).data(), y.data<float>(),
                                     argmax.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::eltwise_max(y.numel(), K, pointers<double>(x).data(), y.data<double>(),
                              argmax.data<double>());
           }));
}

void eltwise_max_backward(Context& ctx, const Tensor& dy, const Tensor& argmax, int i, Tensor& dx) {
  const char* op = "eltwise_max_backward";
  const DType dtype = dy.dtype();
  check_tensors(ctx, op, dy.shape(), dtype, {{"dy", dy}, {"argmax", argmax}, {"dx", dx}});
  if (i < 0) throw Error(std::string(op) + ": negative input index " + std::to_string(i));
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::eltwise_max_backward(dy.numel(), i, dy.data<T>(), argmax.data<T>(), dx.data<T>(), stream);
  };
  dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::eltwise_max_backward(dy.numel(), i, dy.data<float>(), argmax.data<float>(),
                                              dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::eltwise_max_backward(dy.numel(), i, dy.data<double>(), argmax.data<double>(),
                                       dx.data<double>());
           }));
}

}  // namespace crema::kernels
