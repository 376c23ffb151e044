// 2-D pooling, dispatch: checks the tensors and the geometry once, then runs the path for the
// device, dtype and layout (float32: cpu:: or cuda::; bf16 and f16: cuda::, with float32 argmax;
// float64 on the CPU: the reference; nhwc: cuda::, and ref:: on the CPU in f32 and f64). A global
// pooling's forward over a large plane on CUDA is a reduction of its own
// (cuda::global_pool_forward).
#include "kernels/pooling/pooling.h"

#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/common/workspace.h"
#include "kernels/pooling/argmax_checks.h"

namespace crema::kernels {
namespace {

std::string geometry_str(const Pool2dGeometry& g) {
  return "input " + std::to_string(g.H) + "x" + std::to_string(g.W) + ", kernel " +
         std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + ", stride " +
         std::to_string(g.stride_h) + "x" + std::to_string(g.stride_w) + ", pad " +
         std::to_string(g.pad_h) + "x" + std::to_string(g.pad_w) + ", output " +
         std::to_string(g.P) + "x" + std::to_string(g.Q);
}

// Every window must overlap the input: the first (pad < kernel) and the last ((P-1)*stride - pad
// < in) are the extreme ones.
void check_geometry(const char* op, const Pool2dGeometry& g, PoolMode mode) {
  const bool sizes_ok = g.N >= 0 && g.C >= 0 && g.H >= 1 && g.W >= 1 && g.kernel_h >= 1 &&
                        g.kernel_w >= 1 && g.stride_h >= 1 && g.stride_w >= 1 && g.pad_h >= 0 &&
                        g.pad_w >= 0 && g.P >= 1 && g.Q >= 1;
  if (!sizes_ok) throw Error(std::string(op) + ": invalid geometry (" + geometry_str(g) + ")");
  if (g.pad_h >= g.kernel_h || g.pad_w >= g.kernel_w) {
    throw Error(std::string(op) + ": padding must be smaller than the kernel (" + geometry_str(g) +
                ")");
  }
  if ((g.P - 1) * g.stride_h - g.pad_h >= g.H || (g.Q - 1) * g.stride_w - g.pad_w >= g.W) {
    throw Error(std::string(op) + ": the last window lies entirely in the padding (" +
                geometry_str(g) + "); use pool2d_output_extent for the output size");
  }
  pooling_detail::check_argmax_plane(op, mode, g.H, g.W);
}

// The dtype of max pooling's plane indices beside `dtype` tensors: f64 beside f64, else f32.
DType index_dtype(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

}  // namespace

bool is_global_pooling(const Pool2dGeometry& g) {
  return g.P == 1 && g.Q == 1 && g.pad_h == 0 && g.pad_w == 0 && g.kernel_h >= g.H &&
         g.kernel_w >= g.W;
}

int64_t pool2d_output_extent(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                             bool ceil_mode) {
  if (in < 1 || kernel < 1 || stride < 1 || pad < 0 || pad >= kernel || in + 2 * pad < kernel) {
    throw Error("pooling: no window fits an extent of " + std::to_string(in) + " with kernel " +
                std::to_string(kernel) + ", stride " + std::to_string(stride) + ", pad " +
                std::to_string(pad) + " (need pad < kernel <= extent + 2*pad)");
  }
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if ((out - 1) * stride - pad >= in) --out;  // the last window would start in the padding
  return out;
}

void pool2d_forward(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const Tensor& x,
                    Tensor& y, Tensor* argmax) {
  const char* op = "pool2d_forward";
  check_geometry(op, g, mode);
  const DType dtype = x.dtype();
  const Layout layout = x.layout();
  check_tensor(ctx, op, "x", x, {g.N, g.C, g.H, g.W}, dtype);
  check_tensor(ctx, op, "y", y, {g.N, g.C, g.P, g.Q}, dtype);
  check_layout(op, "y", y, layout);
  pooling_detail::check_argmax(ctx, op, mode, argmax, {g.N, g.C, g.P, g.Q}, index_dtype(dtype),
                               false);
  if (argmax != nullptr) check_layout(op, "argmax", *argmax, layout);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    const int64_t HW = g.H * g.W;
    if (is_global_pooling(g) && HW >= cuda::kGlobalReductionPixels) {
      void* workspace =
          workspace_for(ctx, cuda::global_pool_workspace_bytes<T>(g.N, g.C, HW, mode, layout));
      cuda::global_pool_forward(g.N, g.C, HW, mode, x.data<T>(), y.data<T>(),
                                pooling_detail::indices_of<float>(argmax), layout, workspace,
                                stream);
      return;
    }
    cuda::pool2d_forward(g, mode, x.data<T>(), y.data<T>(),
                         pooling_detail::indices_of<float>(argmax), layout, cuda::PoolVersion::best,
                         stream);
  };
  const auto reference = [&](auto element) {
    using T = decltype(element);
    ref::pool2d_forward(g, mode, x.data<T>(), y.data<T>(), pooling_detail::indices_of<T>(argmax),
                        layout);
  };
  dispatch(ctx, op, dtype, layout, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu), on_cuda_typed<float>(gpu, Layout::nhwc),
           on_cuda_typed<bf16_t>(gpu, Layout::nhwc), on_cuda_typed<f16_t>(gpu, Layout::nhwc),
           on_cpu(DType::f32,
                  [&] {
                    cpu::pool2d_forward(g, mode, x.data<float>(), y.data<float>(),
                                        pooling_detail::indices_of<float>(argmax),
                                        ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] { reference(double{}); }),
           on_cpu(
               DType::f32, [&] { reference(float{}); }, Layout::nhwc),
           on_cpu(
               DType::f64, [&] { reference(double{}); }, Layout::nhwc));
}

void pool2d_backward(Context& ctx, const Pool2dGeometry& g, PoolMode mode, const Tensor& dy,
                     const Tensor* argmax, Tensor& dx) {
  const char* op = "pool2d_backward";
  check_geometry(op, g, mode);
  const DType dtype = dy.dtype();
  const Layout layout = dy.layout();
  check_tensor(ctx, op, "dy", dy, {g.N, g.C, g.P, g.Q}, dtype);
  check_tensor(ctx, op, "dx", dx, {g.N, g.C, g.H, g.W}, dtype);
  check_layout(op, "dx", dx, layout);
  pooling_detail::check_argmax(ctx, op, mode, argmax, {g.N, g.C, g.P, g.Q}, index_dtype(dtype),
                               true);
  if (argmax != nullptr) check_layout(op, "argmax", *argmax, layout);
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::pool2d_backward(g, mode, dy.data<T>(), pooling_detail::indices_of<float>(argmax),
                          dx.data<T>(), layout, cuda::PoolVersion::best, stream);
  };
  const auto reference = [&](auto element) {
    using T = decltype(element);
    ref::pool2d_backward(g, mode, dy.data<T>(), pooling_detail::indices_of<T>(argmax), dx.data<T>(),
                         layout);
  };
  dispatch(ctx, op, dtype, layout, on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu), on_cuda_typed<float>(gpu, Layout::nhwc),
           on_cuda_typed<bf16_t>(gpu, Layout::nhwc), on_cuda_typed<f16_t>(gpu, Layout::nhwc),
           on_cpu(DType::f32,
                  [&] {
                    cpu::pool2d_backward(g, mode, dy.data<float>(),
                                         pooling_detail::indices_of<float>(argmax),
                                         dx.data<float>(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] { reference(double{}); }),
           on_cpu(
               DType::f32, [&] { reference(float{}); }, Layout::nhwc),
           on_cpu(
               DType::f64, [&] { reference(double{}); }, Layout::nhwc));
}

}  // namespace crema::kernels
