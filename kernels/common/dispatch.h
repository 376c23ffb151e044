// The one dispatch of every Tensor-level op: after its tensors are checked (tensor_checks.h), an
// op names the implementations it has -- where each runs, which element type and which layout
// it reads -- and `dispatch` runs the one that serves the call:
//
//   dispatch(ctx, "lrn_forward", x.dtype(), Layout::nchw,
//            on_cuda(DType::f32, [&](auto stream) { cuda::lrn_forward(..., stream); }),
//            on_cpu(DType::f32, [&] { cpu::lrn_forward(..., ctx.num_threads()); }),
//            on_cpu(DType::f64, [&] { ref::lrn_forward<double>(...); }));
//
// A call that no implementation serves (bf16 on the CPU, say) throws crema::Error naming the op,
// what was asked for and what exists: "lrn_forward: no implementation for bf16 nchw on cuda:0
// (implemented: f32 nchw on cuda, f32 nchw on cpu, f64 nchw on cpu)".
//
// The CUDA implementation is a generic lambda (`auto stream`): its body is compiled only where it
// can run. A build without CUDA never instantiates it, so the cuda:: functions it calls need not
// exist there -- no #ifdef in any dispatch file and no stand-in to keep in step with the real
// entry points. (The call inside depends on `stream`'s type, which is what defers it.)
#pragma once

#include <string>
#include <utility>

#include "core/build_config.h"
#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"

namespace crema::kernels {

// Layouts are crema::Layout (core/tensor.h): how a 4-D tensor orders its axes in memory. Ops
// without spatial axes ignore it.

// One implementation of an op for `dtype` tensors in `layout`; Run is its code.
template <class Run>
struct CpuImpl {
  DType dtype;
  Layout layout;
  Run run;  // void()
};
template <class Run>
struct CudaImpl {
  DType dtype;
  Layout layout;
  Run run;  // void(gpu::Stream), a generic lambda
};

template <class Run>
CpuImpl<Run> on_cpu(DType dtype, Run run, Layout layout = Layout::nchw) {
  return {dtype, layout, std::move(run)};
}
template <class Run>
CudaImpl<Run> on_cuda(DType dtype, Run run, Layout layout = Layout::nchw) {
  return {dtype, layout, std::move(run)};
}

// on_cuda for the element type T (float, bf16_t, f16_t): `run(T{}, stream)`, so that one generic
// lambda serves every dtype an op's CUDA code is templated on:
//   const auto gpu = [&](auto element, auto stream) {
//     using T = decltype(element);
//     cuda::relu_forward(n, x.data<T>(), y.data<T>(), ..., stream);
//   };
//   dispatch(ctx, op, dtype, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu), ...);
template <class T, class Run>
auto on_cuda_typed(Run run, Layout layout = Layout::nchw) {
  return on_cuda(
      dtype_of<T>(), [run](auto stream) { run(T{}, stream); }, layout);
}

namespace detail {

// "f32 nchw on cpu"
std::string impl_description(DType dtype, Layout layout, const char* where);
[[noreturn]] void no_implementation(const Context& ctx, const char* op, DType dtype, Layout layout,
                                    const std::string& implemented);

template <class Run>
bool try_run(const Context& ctx, DType dtype, Layout layout, CpuImpl<Run>& impl) {
  if (!ctx.device().is_cpu() || impl.dtype != dtype || impl.layout != layout) return false;
  impl.run();
  return true;
}

template <class Run>
bool try_run(const Context& ctx, DType dtype, Layout layout, CudaImpl<Run>& impl) {
  if constexpr (kBuiltWithCuda) {
    if (!ctx.device().is_cuda() || impl.dtype != dtype || impl.layout != layout) return false;
    const gpu::DeviceGuard guard(ctx.device().index);  // the context's GPU, whichever thread runs
    impl.run(ctx.stream());
    return true;
  } else {
    return false;  // a CUDA context cannot exist in this build (Context refuses the device)
  }
}

template <class Run>
std::string describe(const CpuImpl<Run>& impl) {
  return impl_description(impl.dtype, impl.layout, "cpu");
}
template <class Run>
std::string describe(const CudaImpl<Run>& impl) {
  return impl_description(impl.dtype, impl.layout, "cuda");
}

}  // namespace detail

// Runs the first of `impls` that serves (ctx's device, dtype, layout); crema::Error otherwise.
template <class... Impls>
void dispatch(const Context& ctx, const char* op, DType dtype, Layout layout, Impls... impls) {
  if ((detail::try_run(ctx, dtype, layout, impls) || ...)) return;
  std::string implemented;
  ((implemented += (implemented.empty() ? "" : ", ") + detail::describe(impls)), ...);
  detail::no_implementation(ctx, op, dtype, layout, implemented);
}

// The common case: NCHW (or no layout at all).
template <class... Impls>
void dispatch(const Context& ctx, const char* op, DType dtype, Impls... impls) {
  dispatch(ctx, op, dtype, Layout::nchw, std::move(impls)...);
}

}  // namespace crema::kernels
