// 2-D convolution: geometry checks and the one dispatch point (its transpose, built on these
// passes: convolution_transpose.cpp). Each call
// checks its tensors, then dispatches (kernels/common/dispatch.h) on the activations' dtype and
// layout (the first input's; convolution.h, "Tensors"):
//   cuda f32 nchw       asks select_conv_algorithm (select.h) once for the request's algorithm
//                       and runs that record's pass on the context's stream, its scratch from
//                       ctx.workspace();
//   cuda f32 nhwc       the NHWC implicit GEMMs (cuda::conv2d_*_nhwc) in request.math;
//   cuda bf16/f16 nhwc  the tensor-core implicit GEMMs (convolution_tc.h), fp32 bias in the
//                       forward epilogue, fp32 filter gradient;
//   cpu f32 nchw        the fast im2col + GEMM path (fp32 whatever the math);
//   cpu f32 nhwc        the same path between transposes (convolution_nhwc_cpu.cpp);
//   cpu f64             the references, NCHW (ref::conv2d_*) or NHWC (ref::conv2d_*_nhwc); they
//                       exist for gradient checks, where exactness matters more than speed.
// On CUDA in nhwc there is one kernel per pass and dtype: the request's algorithm choice (auto,
// find, a pinned record) is for the nchw records and is not consulted there.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"
#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_tc.h"
#include "kernels/elementwise/elementwise.h"

namespace crema::kernels {
namespace {

std::string pair_str(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

void check_positive(const std::string& where, const char* name, int64_t value) {
  if (value <= 0) {
    throw Error(where + ": " + name + " must be positive, got " + std::to_string(value));
  }
}

// An optional tensor's data (bias, db): null when the tensor is absent.
template <class T, class TensorPtr>
auto data_or_null(TensorPtr t) -> decltype(t->template data<T>()) {
  return t ? t->template data<T>() : nullptr;
}

// The record `request` picks for (pass, g) and its workspace from the context.
struct Chosen {
  const ConvAlgorithm& algorithm;
  float* workspace;
};
Chosen choose(Context& ctx, const char* op, ConvPass pass, const Conv2dGeometry& g,
              const ConvRequest& request, bool with_bias = false) {
  const ConvAlgorithm& algorithm = select_conv_algorithm(ctx, pass, g, request, op);
  return {algorithm, ctx.workspace(algorithm.workspace(pass, g, with_bias))};
}

// The dtypes and layout of one call: the activations' (x, y, dy, dx and the filter w) are the
// first input's; the parameters' (bias, db, dw) conv_parameter_dtype of that.
struct Types {
  DType activations, parameters;
  Layout layout;
  const char* first;  // the first input's name, for the messages
};
Types types_of(const Tensor& t, const char* name) {
  return {t.dtype(), conv_parameter_dtype(t.dtype()), t.layout(), name};
}

// check_tensor, then the layout: every 4-D tensor of a call is in the first input's.
void check_conv_tensor(const Context& ctx, const std::string& op, const char* name, const Tensor& t,
                       const Shape& shape, DType dtype, const Types& types) {
  check_tensor(ctx, op, name, t, shape, dtype);
  if (t.layout() != types.layout) {
    throw Error(op + ": " + name + " is " + layout_name(t.layout()) + " (" + t.description() +
                "), expected " + layout_name(types.layout) + " as " + types.first + " is");
  }
}

// 32-bit indexing: the NHWC kernels index their tensors with int (select.h checks the same for
// the nchw records).
void check_cuda_sizes(const std::string& op, const Conv2dGeometry& g) {
  const int64_t largest = std::max(
      {g.N * g.C * g.H * g.W, g.N * g.K * g.P() * g.Q(), g.K * (g.C / g.groups) * g.R * g.S});
  if (largest >= INT32_MAX) {
    throw Error(op + ": conv2d on CUDA: tensors of 2^31 elements or more are not supported " +
                "(the largest here has " + std::to_string(largest) + "); use a smaller batch");
  }
}

// The tensor-core kernels' element type for bf16_t or f16_t, and their scratch (they count
// bytes) from the context's workspace (floats).
template <class T>
constexpr cuda::TcType tc_type() {
  static_assert(std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>, "bf16 or f16");
  return std::is_same_v<T, bf16_t> ? cuda::TcType::bf16 : cuda::TcType::f16;
}
void* tc_workspace(Context& ctx, size_t bytes) {
  return ctx.workspace((bytes + sizeof(float) - 1) / sizeof(float));
}

}  // namespace

void Conv2dGeometry::validate(const std::string& where) const {
  check_positive(where, "batch size N", N);
  check_positive(where, "input channels C", C);
  check_positive(where, "input height H", H);
  check_positive(where, "input width W", W);
  check_positive(where, "output channels K", K);
  check_positive(where, "filter height R", R);
  check_positive(where, "filter width S", S);
  check_positive(where, "stride_h", stride_h);
  check_positive(where, "stride_w", stride_w);
  check_positive(where, "dilation_h", dilation_h);
  check_positive(where, "dilation_w", dilation_w);
  check_positive(where, "groups", groups);
  if (pad_h < 0 || pad_w < 0) {
    throw Error(where + ": padding must not be negative, got " + pair_str(pad_h, pad_w));
  }
  if (C % groups != 0 || K % groups != 0) {
    throw Error(where + ": " + std::to_string(groups) + " groups must divide both the input " +
                "channels C=" + std::to_string(C) +
                " and the output channels K=" + std::to_string(K));
  }
  const int64_t span_h = dilation_h * (R - 1) + 1, span_w = dilation_w * (S - 1) + 1;
  if (span_h > H + 2 * pad_h || span_w > W + 2 * pad_w) {
    throw Error(where + ": the " + pair_str(R, S) + " filter (spanning " +
                pair_str(span_h, span_w) + " with dilation " + pair_str(dilation_h, dilation_w) +
                ") is larger than the padded input " + pair_str(H + 2 * pad_h, W + 2 * pad_w) +
                " (input " + pair_str(H, W) + ", padding " + pair_str(pad_h, pad_w) +
                "); use a smaller filter or more padding");
  }
}

Im2colGeometry Conv2dGeometry::group_patches() const {
  return {C / groups, H, W, R, S, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w};
}

DType conv_parameter_dtype(DType activations) {
  return activations == DType::bf16 || activations == DType::f16 ? DType::f32 : activations;
}

namespace {

// A template, so that a build without CUDA -- where the wgmma queries do not exist -- never
// instantiates the branch that calls them (as algorithms.cpp's table).
template <bool with_cuda>
const char* nhwc_kernel(ConvPass pass, const Conv2dGeometry& g, DType dtype, cuda::GemmMath math) {
  if constexpr (with_cuda) {
    const bool typed = dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
    if (typed && g.depthwise()) return "depthwise_nhwc";
    const bool grouped = pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_grouped(g)
                         : pass == ConvPass::backward_data
                             ? cuda::conv2d_tc_backward_data_uses_grouped(g)
                             : cuda::conv2d_tc_backward_filter_uses_grouped(g);
    if ((dtype == DType::bf16 || dtype == DType::f16) && grouped) return "direct_grouped";
    if (pass == ConvPass::backward_data &&
        (dtype == DType::f32 ? cuda::conv2d_backward_data_nhwc_uses_direct_mma(g, math)
         : dtype == DType::bf16
             ? cuda::conv2d_tc_backward_data_uses_direct_mma(g, cuda::TcType::bf16)
         : dtype == DType::f16 ? cuda::conv2d_tc_backward_data_uses_direct_mma(g, cuda::TcType::f16)
                               : false)) {
      return "direct_mma_few_channels";
    }
    if (pass == ConvPass::backward_data &&
        (dtype == DType::f32    ? cuda::conv2d_backward_data_nhwc_uses_direct(g, math)
         : dtype == DType::bf16 ? cuda::conv2d_tc_backward_data_uses_direct(g, cuda::TcType::bf16)
         : dtype == DType::f16  ? cuda::conv2d_tc_backward_data_uses_direct(g, cuda::TcType::f16)
                                : false)) {
      return "direct_few_channels";
    }
    if (pass == ConvPass::backward_data &&
        (dtype == DType::f32    ? cuda::conv2d_backward_data_nhwc_uses_col2im(g, math)
         : dtype == DType::bf16 ? cuda::conv2d_tc_backward_data_uses_col2im(g, cuda::TcType::bf16)
                                : false)) {
      return "col2im_gemm";
    }
    if (dtype == DType::f32) {
      const bool wgmma = pass == ConvPass::forward ? cuda::conv2d_forward_nhwc_uses_wgmma(g, math)
                         : pass == ConvPass::backward_data
                             ? cuda::conv2d_backward_data_nhwc_uses_wgmma(g, math)
                             : cuda::conv2d_backward_filter_nhwc_uses_wgmma(g, math);
      return wgmma ? "tc_wgmma" : "nhwc_implicit_gemm";
    }
    if (dtype != DType::bf16 && dtype != DType::f16) return "";
    // (The layer fusing batch norm's statistics into the forward takes the implicit GEMMs.)
    if (pass == ConvPass::forward && cuda::conv2d_tc_forward_uses_stem(g)) return "stem_mma";
    if (pass == ConvPass::backward_filter && cuda::conv2d_tc_backward_filter_uses_stem(g)) {
      return "stem_mma";
    }
    const bool wgmma = pass == ConvPass::forward ? cuda::conv2d_tc_forward_uses_wgmma(g)
                       : pass == ConvPass::backward_data
                           ? cuda::conv2d_tc_backward_data_uses_wgmma(g)
                           : cuda::conv2d_tc_backward_filter_uses_wgmma(g);
    return wgmma ? "tc_wgmma" : "tc_implicit_gemm";
  } else {
    return "";
  }
}

}  // namespace

const char* conv2d_nhwc_kernel(ConvPass pass, const Conv2dGeometry& g, DType dtype,
                               cuda::GemmMath math) {
  return nhwc_kernel<kBuiltWithCuda>(pass, g, dtype, math);
}

void conv2d_forward(Context& ctx, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                    const Tensor* bias, Tensor& y, const ConvRequest& request) {
  const char* op = "conv2d_forward";
  g.validate(op);
  const Types t = types_of(x, "x");
  check_conv_tensor(ctx, op, "x", x, g.x_shape(), t.activations, t);
  check_conv_tensor(ctx, op, "w", w, g.w_shape(), t.activations, t);
  if (bias) check_tensor(ctx, op, "bias", *bias, {g.K}, t.parameters);
  check_conv_tensor(ctx, op, "y", y, g.y_shape(), t.activations, t);
  const auto tc = [&](auto element, auto stream) {
    using T = decltype(element);
    check_cuda_sizes(op, g);
    cuda::TcEpilogue epilogue;
    epilogue.bias = data_or_null<float>(bias);
    // No channel statistics are fused here, so no workspace (theirs made ResNet-50 bf16 at
    // batch 128 ask up to 49 MiB for nothing).
    cuda::conv2d_tc_forward(g, tc_type<T>(), x.data<T>(), w.data<T>(), y.data<T>(), epilogue,
                            nullptr, stream);
  };
  dispatch(
      ctx, op, t.activations, t.layout,
      on_cuda(DType::f32,
              [&](auto stream) {
                const Chosen c = choose(ctx, op, ConvPass::forward, g, request);
                c.algorithm.forward(g, x.data<float>(), w.data<float>(), data_or_null<float>(bias),
                                    y.data<float>(), c.workspace, stream, request.math);
              }),
      on_cuda(
          DType::f32,
          [&](auto stream) {
            check_cuda_sizes(op, g);
            cuda::conv2d_forward_nhwc(
                g, x.data<float>(), w.data<float>(), data_or_null<float>(bias), y.data<float>(),
                ctx.workspace(cuda::conv2d_forward_nhwc_workspace(g)), stream, request.math);
          },
          Layout::nhwc),
      on_cuda_typed<bf16_t>(tc, Layout::nhwc), on_cuda_typed<f16_t>(tc, Layout::nhwc),
      on_cpu(DType::f32,
             [&] {
               float* workspace =
                   ctx.workspace(cpu::conv2d_forward_workspace(g, ctx.num_threads()));
               cpu::conv2d_forward(g, x.data<float>(), w.data<float>(), data_or_null<float>(bias),
                                   y.data<float>(), workspace, ctx.num_threads());
             }),
      on_cpu(
          DType::f32,
          [&] {
            float* workspace =
                ctx.workspace(cpu::conv2d_forward_nhwc_workspace(g, ctx.num_threads()));
            cpu::conv2d_forward_nhwc(g, x.data<float>(), w.data<float>(), data_or_null<float>(bias),
                                     y.data<float>(), workspace, ctx.num_threads());
          },
          Layout::nhwc),
      on_cpu(DType::f64,
             [&] {
               ref::conv2d_forward(g, x.data<double>(), w.data<double>(),
                                   data_or_null<double>(bias), y.data<double>());
             }),
      on_cpu(
          DType::f64,
          [&] {
            ref::conv2d_forward_nhwc(g, x.data<double>(), w.data<double>(),
                                     data_or_null<double>(bias), y.data<double>());
          },
          Layout::nhwc));
}

void conv2d_backward_data(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, const Tensor& w,
                          Tensor& dx, const ConvRequest& request) {
  const char* op = "conv2d_backward_data";
  g.validate(op);
  const Types t = types_of(dy, "dy");
  check_conv_tensor(ctx, op, "dy", dy, g.y_shape(), t.activations, t);
  check_conv_tensor(ctx, op, "w", w, g.w_shape(), t.activations, t);
  check_conv_tensor(ctx, op, "dx", dx, g.x_shape(), t.activations, t);
  const auto tc = [&](auto element, auto stream) {
    using T = decltype(element);
    check_cuda_sizes(op, g);
    void* workspace = tc_workspace(ctx, cuda::conv2d_tc_backward_data_workspace(g, tc_type<T>()));
    cuda::conv2d_tc_backward_data(g, tc_type<T>(), dy.data<T>(), w.data<T>(), dx.data<T>(),
                                  workspace, stream);
  };
  dispatch(
      ctx, op, t.activations, t.layout,
      on_cuda(DType::f32,
              [&](auto stream) {
                const Chosen c = choose(ctx, op, ConvPass::backward_data, g, request);
                c.algorithm.backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                          c.workspace, stream, request.math);
              }),
      on_cuda(
          DType::f32,
          [&](auto stream) {
            check_cuda_sizes(op, g);
            cuda::conv2d_backward_data_nhwc(
                g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                ctx.workspace(cuda::conv2d_backward_data_nhwc_workspace(g)), stream, request.math);
          },
          Layout::nhwc),
      on_cuda_typed<bf16_t>(tc, Layout::nhwc), on_cuda_typed<f16_t>(tc, Layout::nhwc),
      on_cpu(DType::f32,
             [&] {
               float* workspace =
                   ctx.workspace(cpu::conv2d_backward_data_workspace(g, ctx.num_threads()));
               cpu::conv2d_backward_data(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                         workspace, ctx.num_threads());
             }),
      on_cpu(
          DType::f32,
          [&] {
            float* workspace =
                ctx.workspace(cpu::conv2d_backward_data_nhwc_workspace(g, ctx.num_threads()));
            cpu::conv2d_backward_data_nhwc(g, dy.data<float>(), w.data<float>(), dx.data<float>(),
                                           workspace, ctx.num_threads());
          },
          Layout::nhwc),
      on_cpu(DType::f64,
             [&] {
               ref::conv2d_backward_data(g, dy.data<double>(), w.data<double>(), dx.data<double>());
             }),
      on_cpu(
          DType::f64,
          [&] {
            ref::conv2d_backward_data_nhwc(g, dy.data<double>(), w.data<double>(),
                                           dx.data<double>());
          },
          Layout::nhwc));
}

void conv2d_backward_filter(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                            const Tensor& dy, Tensor& dw, const ConvRequest& request) {
  conv2d_backward_weights(ctx, g, x, dy, dw, nullptr, request);
}

// In nhwc on CUDA, the channels-last bias kernel for every dtype (f32, bf16, f16).
void conv2d_backward_bias(Context& ctx, const Conv2dGeometry& g, const Tensor& dy, Tensor& db) {
  const char* op = "conv2d_backward_bias";
  g.validate(op);
  const Types t = types_of(dy, "dy");
  check_conv_tensor(ctx, op, "dy", dy, g.y_shape(), t.activations, t);
  check_tensor(ctx, op, "db", db, {g.K}, t.parameters);
  const auto nhwc = [&](auto element, auto stream) {
    using T = decltype(element);
    check_cuda_sizes(op, g);
    cuda::conv2d_backward_bias_nhwc(g, dy.data<T>(), db.data<float>(),
                                    ctx.workspace(cuda::conv2d_backward_bias_nhwc_workspace(g)),
                                    stream);
  };
  const int64_t rows = g.N * g.P() * g.Q();  // of dy [N*P*Q, K] in nhwc
  dispatch(ctx, op, t.activations, t.layout,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(), stream);
                   }),
           on_cuda_typed<float>(nhwc, Layout::nhwc), on_cuda_typed<bf16_t>(nhwc, Layout::nhwc),
           on_cuda_typed<f16_t>(nhwc, Layout::nhwc),
           on_cpu(DType::f32,
                  [&] {
                    cpu::conv2d_backward_bias(g, dy.data<float>(), db.data<float>(),
                                              ctx.num_threads());
                  }),
           on_cpu(
               DType::f32,
               [&] {
                 cpu::conv2d_backward_bias_nhwc(g, dy.data<float>(), db.data<float>(),
                                                ctx.num_threads());
               },
               Layout::nhwc),
           on_cpu(DType::f64,
                  [&] { ref::conv2d_backward_bias(g, dy.data<double>(), db.data<double>()); }),
           on_cpu(
               DType::f64,
               [&] { ref::accumulate_bias_rows(rows, g.K, dy.data<double>(), db.data<double>()); },
               Layout::nhwc));
}

// On the GPU the bias gradient rides along in the nchw records' filter pass; on the CPU, and in
// nhwc, it is its own pass (conv2d_backward_bias).
void conv2d_backward_weights(Context& ctx, const Conv2dGeometry& g, const Tensor& x,
                             const Tensor& dy, Tensor& dw, Tensor* db, const ConvRequest& request) {
  const char* op = db ? "conv2d_backward_weights" : "conv2d_backward_filter";
  g.validate(op);
  const Types t = types_of(x, "x");
  check_conv_tensor(ctx, op, "x", x, g.x_shape(), t.activations, t);
  check_conv_tensor(ctx, op, "dy", dy, g.y_shape(), t.activations, t);
  check_conv_tensor(ctx, op, "dw", dw, g.w_shape(), t.parameters, t);
  if (db) check_tensor(ctx, op, "db", *db, {g.K}, t.parameters);
  const auto tc = [&](auto element, auto stream) {
    using T = decltype(element);
    check_cuda_sizes(op, g);
    cuda::conv2d_tc_backward_filter(g, tc_type<T>(), x.data<T>(), dy.data<T>(), dw.data<float>(),
                                    tc_workspace(ctx, cuda::conv2d_tc_backward_filter_workspace(g)),
                                    stream);
  };
  bool bias_done = false;  // whether the filter pass summed db as well
  dispatch(ctx, op, t.activations, t.layout,
           on_cuda(DType::f32,
                   [&](auto stream) {
                     const Chosen c =
                         choose(ctx, op, ConvPass::backward_filter, g, request, db != nullptr);
                     c.algorithm.backward_filter(g, x.data<float>(), dy.data<float>(),
                                                 dw.data<float>(), data_or_null<float>(db),
                                                 c.workspace, stream, request.math);
                     bias_done = true;
                   }),
           on_cuda(
               DType::f32,
               [&](auto stream) {
                 check_cuda_sizes(op, g);
                 cuda::conv2d_backward_filter_nhwc(
                     g, x.data<float>(), dy.data<float>(), dw.data<float>(), nullptr,
                     ctx.workspace(cuda::conv2d_backward_filter_nhwc_workspace(g)), stream,
                     request.math);
               },
               Layout::nhwc),
           on_cuda_typed<bf16_t>(tc, Layout::nhwc), on_cuda_typed<f16_t>(tc, Layout::nhwc),
           on_cpu(DType::f32,
                  [&] {
                    float* workspace =
                        ctx.workspace(cpu::conv2d_backward_filter_workspace(g, ctx.num_threads()));
                    cpu::conv2d_backward_filter(g, x.data<float>(), dy.data<float>(),
                                                dw.data<float>(), workspace, ctx.num_threads());
                  }),
           on_cpu(
               DType::f32,
               [&] {
                 float* workspace = ctx.workspace(
                     cpu::conv2d_backward_filter_nhwc_workspace(g, ctx.num_threads()));
                 cpu::conv2d_backward_filter_nhwc(g, x.data<float>(), dy.data<float>(),
                                                  dw.data<float>(), workspace, ctx.num_threads());
               },
               Layout::nhwc),
           on_cpu(DType::f64,
                  [&] {
                    ref::conv2d_backward_filter(g, x.data<double>(), dy.data<double>(),
                                                dw.data<double>());
                  }),
           on_cpu(
               DType::f64,
               [&] {
                 ref::conv2d_backward_filter_nhwc(g, x.data<double>(), dy.data<double>(),
                                                  dw.data<double>());
               },
               Layout::nhwc));
  if (db && !bias_done) conv2d_backward_bias(ctx, g, dy, *db);
}

}  // namespace crema::kernels
