// Pooling: the maximum or the average of each kernel_h x kernel_w window, or of each window of
// a 1-D ([N, C, L]) or 3-D ([N, C, D, H, W]) input, one extent per spatial axis (PyTorch's
// MaxPool1d/3d, AvgPool1d/3d; kernels/pooling/pooling_nd.h: the argmax is then the flat index
// within the plane, (d*H + h)*W + w).
//
//   x [N,C,H,W] -> y [N,C,P,Q]
//   max:     y[n,c,p,q] = max over the window of x          (second top, optional: the argmax,
//                                                             the flat index h*W+w in the plane)
//   average: y[n,c,p,q] = sum over the window of x / window size, the size counted within the
//            padded input (count_include_pad: true, Caffe's rule and PyTorch's default) or within
//            the input (count_include_pad: false)
//   P = round((H + 2*pad_h - kernel_h) / stride_h) + 1, round = ceil (Caffe, the default) or
//   floor (PyTorch); a last window that would start inside the bottom/right padding is dropped,
//   so every window overlaps the image. Padding never wins a max (PyTorch's -inf padding).
//
// YAML keys (defaults): pool (max | average), kernel_size (required unless global_pooling; or
//   kernel_h + kernel_w), stride (1; or stride_h + stride_w), pad (0, less than the kernel; or
//   pad_h + pad_w) -- each n for every spatial axis or one per axis ([h, w], [l], [d, h, w]; a
//   list of another length is an error naming the layer and the key) --, global_pooling (false:
//   true pools each whole plane to 1x1 and takes no kernel, stride or pad), round_mode (ceil |
//   floor), count_include_pad (true; average pooling only), output_size (none; n or [h, w]:
//   adaptive pooling, below; 2-D only).
//
// Adaptive pooling (PyTorch's AdaptiveAvgPool2d / AdaptiveMaxPool2d): with output_size: [P, Q]
// the output is [N, C, P, Q] whatever H and W, output (p, q) pooling rows
// [floor(p*H/P), ceil((p+1)*H/P)) and columns likewise (kernels/pooling/adaptive_pooling.h). It
// takes no kernel, stride, pad, global_pooling, round_mode or count_include_pad. Where P divides
// H and Q divides W those windows are a fixed kernel = stride = H/P, W/Q, and the layer runs the
// fixed-window kernels (output_size 1 is global pooling); otherwise the adaptive ones.
//
// Dtypes and layouts (runs): 2-D fixed windows (global pooling, output_size 1) run nchw or nhwc
// (channels-last), and bf16 or f16 on CUDA with an f32 argmax; the rest f32 and f64 nchw.
#include <algorithm>
#include <array>
#include <tuple>

#include "kernels/pooling/adaptive_pooling.h"
#include "kernels/pooling/pooling.h"
#include "kernels/pooling/pooling_nd.h"
#include "layers/key_error.h"
#include "layers/layer_runs.h"
#include "layers/register_layers.h"
#include "layers/weighted_layer.h"

namespace crema {
namespace {

class PoolingLayer final : public Layer {
 public:
  explicit PoolingLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    const std::string pool = node.get<std::string>("pool", "max");
    if (pool == "max") {
      mode_ = kernels::PoolMode::max;
    } else if (pool == "average" || pool == "ave") {
      mode_ = kernels::PoolMode::average;
    } else {
      fail_at_key(spec, "pool", "must be max or average, got '" + pool + "'");
    }
    global_ = node.get<bool>("global_pooling", false);
    adaptive_ = node.has("output_size");
    if (adaptive_) {
      for (const char* key :
           {"kernel_size", "kernel_h", "kernel_w", "stride", "stride_h", "stride_w", "pad", "pad_h",
            "pad_w", "global_pooling", "round_mode", "count_include_pad"}) {
        if (node.has(key)) {
          fail_at_key(spec, key, "output_size sets the windows (adaptive pooling); remove it");
        }
      }
      std::tie(output_h_, output_w_) = read_spatial(spec, "output_size", "", std::nullopt, 1);
      return;
    }
    if (global_) {
      for (const char* key : {"kernel_size", "kernel_h", "kernel_w", "stride", "stride_h",
                              "stride_w", "pad", "pad_h", "pad_w"}) {
        if (node.has(key))
          fail_at_key(spec, key, "global_pooling pools the whole plane; remove it");
      }
    } else {
      kernel_ = read_spatial_size(spec, "kernel_size", "kernel", std::nullopt, 1);
      stride_ = read_spatial_size(spec, "stride", "stride", 1, 1);
      pad_ = read_spatial_size(spec, "pad", "pad", 0, 0);
      check_pad_below_kernel();
    }
    const std::string round = node.get<std::string>("round_mode", "ceil");
    if (round != "ceil" && round != "floor") {
      fail_at_key(spec, "round_mode", "must be ceil or floor, got '" + round + "'");
    }
    ceil_ = round == "ceil";
    // Only average pooling reads count_include_pad: given to max pooling, it is an unknown key.
    if (mode_ == kernels::PoolMode::average) {
      count_include_pad_ = node.get<bool>("count_include_pad", true);
    }
  }

  int max_tops() const override { return mode_ == kernels::PoolMode::max ? 2 : 1; }

  // 2-D fixed windows (global pooling and adaptive pooling to 1x1 included) run nhwc and, on
  // CUDA, bf16 and f16; the argmax top, 1-D and 3-D pooling and adaptive windows run f32 and f64
  // nchw only (their kernels). A scalar kernel_size fixes no rank: such a layer answers for 2-D
  // inputs, and a 1-D or 3-D one in bf16 or nhwc is refused by the kernel's dispatch, named.
  bool runs(DType dtype, Layout layout, const Device& device) const override {
    const bool fixed_2d =
        (adaptive_ ? output_h_ == 1 && output_w_ == 1 : spatial_2d()) && spec_.tops.size() == 1;
    if (!fixed_2d) return Layer::runs(dtype, layout, device) && kernels_run(dtype, device, false);
    return kernels_run(dtype, device, true);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 3 || x.ndim() > 5) {
      fail("expects a 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W] input, got " +
           shape_str(x.shape()));
    }
    if (x.ndim() == 4) {
      geometry_ = geometry(x);
      nd_ = kernels::PoolNdGeometry{};
    } else {
      nd_ = geometry_nd(x);
    }
    // Plane indices: f64 beside f64, else f32 (bf16 cannot hold them), in x's layout.
    if (!argmax_.defined())
      argmax_ = ctx.empty({0}, x.dtype() == DType::f64 ? x.dtype() : DType::f32);
    argmax_.set_layout(x.layout());
    const auto& g = geometry_;
    const Shape y_shape = nd_.rank != 2 ? nd_.y_shape() : Shape{g.N, g.C, g.P, g.Q};
    top[0]->value.reshape(y_shape);
    if (top.size() > 1) {
      top[1]->value.reshape(y_shape);
    } else if (mode_ == kernels::PoolMode::max) {
      argmax_.reshape(y_shape);
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (nd_.rank != 2) {
      kernels::pool_nd_forward(ctx, nd_, mode_, bottom[0]->value, top[0]->value, argmax(top));
    } else if (run_adaptive_) {
      kernels::adaptive_pool2d_forward(ctx, adaptive_geometry(), mode_, bottom[0]->value,
                                       top[0]->value, argmax(top));
    } else {
      kernels::pool2d_forward(ctx, geometry_, mode_, bottom[0]->value, top[0]->value, argmax(top));
    }
  }

  // Each output's gradient flows back to its window: all of it to the argmax (max), or an equal
  // share, dy / window size, to every input element of the window (average).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    if (nd_.rank != 2) {
      kernels::pool_nd_backward(ctx, nd_, mode_, top[0]->grad, argmax(top), bottom[0]->grad);
    } else if (run_adaptive_) {
      kernels::adaptive_pool2d_backward(ctx, adaptive_geometry(), mode_, top[0]->grad, argmax(top),
                                        bottom[0]->grad);
    } else {
      kernels::pool2d_backward(ctx, geometry_, mode_, top[0]->grad, argmax(top), bottom[0]->grad);
    }
  }

  // Pool with the same windows (adaptive pooling where its windows are fixed, 1x1 as global
  // pooling): ceil mode becomes explicit end padding (windows that start in
  // the input or the left padding, as here), except for average pooling counting that padding,
  // where ONNX's own ceil_mode keeps the divisor of the clipped last window.
  // Max pooling's backward reads the argmax (its own, or the second top), average reads nothing.
  BackwardReads backward_reads() const override { return {false, true}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (io.tops.size() > 1) fail("the argmax top has no ONNX form; export without it");
    if (nd_.rank != 2) {
      fail("exports 2-D pooling only; this layer pools " + std::to_string(nd_.rank) + "-D inputs " +
           shape_str(nd_.x_shape()));
    }
    const bool average = mode_ == kernels::PoolMode::average;
    const auto& p = geometry_;
    if (run_adaptive_) {
      fail("adaptive pooling to " + std::to_string(p.P) + "x" + std::to_string(p.Q) + " of a " +
           std::to_string(p.H) + "x" + std::to_string(p.W) +
           " input (windows of different sizes) has no ONNX operator");
    }
    if (global_ || (adaptive_ && p.P == 1 && p.Q == 1)) {
      g.node(average ? "GlobalAveragePool" : "GlobalMaxPool", {io.bottom(0)}, {io.top(0)});
      return;
    }
    const int64_t end_h = std::max<int64_t>(0, (p.P - 1) * p.stride_h + p.kernel_h - p.H - p.pad_h);
    const int64_t end_w = std::max<int64_t>(0, (p.Q - 1) * p.stride_w + p.kernel_w - p.W - p.pad_w);
    const bool onnx_ceil = average && count_include_pad_ && (end_h > p.pad_h || end_w > p.pad_w);
    std::vector<GraphAttribute> attributes{
        {"kernel_shape", std::vector<int64_t>{p.kernel_h, p.kernel_w}},
        {"strides", std::vector<int64_t>{p.stride_h, p.stride_w}},
        {"pads", onnx_ceil ? std::vector<int64_t>{p.pad_h, p.pad_w, p.pad_h, p.pad_w}
                           : std::vector<int64_t>{p.pad_h, p.pad_w, end_h, end_w}},
        {"ceil_mode", int64_t(onnx_ceil ? 1 : 0)}};
    if (average) attributes.emplace_back("count_include_pad", int64_t(count_include_pad_ ? 1 : 0));
    g.node(average ? "AveragePool" : "MaxPool", {io.bottom(0)}, {io.top(0)}, attributes);
  }

 private:
  Tensor* argmax(const std::vector<Blob*>& top) {
    if (mode_ != kernels::PoolMode::max) return nullptr;
    return top.size() > 1 ? &top[1]->value : &argmax_;
  }

  // pad < kernel on every axis the keys fix alone (lists of different lengths meet the input's
  // rank in geometry(), which names the key that does not fit).
  void check_pad_below_kernel() const {
    const size_t axes = std::max(kernel_.values.size(), pad_.values.size());
    const bool comparable =
        kernel_.every_axis || pad_.every_axis || kernel_.values.size() == pad_.values.size();
    if (!comparable) return;
    for (size_t a = 0; a < axes; ++a) {
      const int64_t k = kernel_.values[kernel_.every_axis ? 0 : a];
      const int64_t p = pad_.values[pad_.every_axis ? 0 : a];
      if (p < k) continue;
      std::string kernel_str;
      for (size_t i = 0; i < axes; ++i) {
        kernel_str += (i ? "x" : "") + std::to_string(kernel_.values[kernel_.every_axis ? 0 : i]);
      }
      fail_at_key(spec_,
                  spec_.node->has("pad") ? "pad"
                  : a == 0               ? "pad_h"
                                         : "pad_w",
                  "must be smaller than the kernel " + kernel_str);
    }
  }

  // Rank 1 and 3 (4-D inputs: geometry() below): fixed windows or global pooling.
  kernels::PoolNdGeometry geometry_nd(const Tensor& x) const {
    if (adaptive_) {
      fail_at_key(spec_, "output_size",
                  "adaptive pooling takes a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    }
    const int rank = x.ndim() - 2;
    const std::string what = "the input " + shape_str(x.shape());
    kernels::PoolNdGeometry g;
    g.rank = rank;
    g.N = x.dim(0), g.C = x.dim(1);
    for (int a = 0; a < rank; ++a) g.in[a] = x.dim(a + 2);
    g.kernel = global_ ? g.in : kernel_.for_rank(spec_, rank, what);
    g.stride = global_ ? std::array<int64_t, 3>{1, 1, 1} : stride_.for_rank(spec_, rank, what);
    g.pad = global_ ? std::array<int64_t, 3>{} : pad_.for_rank(spec_, rank, what);
    for (int a = 0; a < rank; ++a) {
      if (g.kernel[a] > g.in[a] + 2 * g.pad[a]) {
        fail_at_key(spec_, "kernel_size",
                    "the kernel is larger than the padded input along spatial axis " +
                        std::to_string(a) + " of " + what);
      }
      if (g.pad[a] >= g.kernel[a]) fail_at_key(spec_, "pad", "must be smaller than the kernel");
      g.out[a] = kernels::pool2d_output_extent(g.in[a], g.kernel[a], g.stride[a], g.pad[a], ceil_);
    }
    g.count_include_pad = count_include_pad_;
    return g;
  }

  kernels::Pool2dGeometry geometry(const Tensor& x) {
    kernels::Pool2dGeometry g;
    g.N = x.dim(0), g.C = x.dim(1), g.H = x.dim(2), g.W = x.dim(3);
    if (adaptive_) {
      // Fixed windows where the output size divides the input's (the common case: 1x1, 7x7 of
      // 7x7), the adaptive kernels otherwise; P and Q are the output size either way.
      run_adaptive_ = g.H % output_h_ != 0 || g.W % output_w_ != 0;
      g.kernel_h = g.stride_h = run_adaptive_ ? 1 : g.H / output_h_;
      g.kernel_w = g.stride_w = run_adaptive_ ? 1 : g.W / output_w_;
      g.pad_h = g.pad_w = 0;
      g.P = output_h_, g.Q = output_w_;
      return g;
    }
    const std::string what = "the input " + shape_str(x.shape());
    const std::array<int64_t, 3> kernel =
        global_ ? std::array<int64_t, 3>{g.H, g.W} : kernel_.for_rank(spec_, 2, what);
    const std::array<int64_t, 3> stride =
        global_ ? std::array<int64_t, 3>{1, 1} : stride_.for_rank(spec_, 2, what);
    const std::array<int64_t, 3> pad =
        global_ ? std::array<int64_t, 3>{} : pad_.for_rank(spec_, 2, what);
    g.kernel_h = kernel[0], g.kernel_w = kernel[1];
    g.stride_h = stride[0], g.stride_w = stride[1], g.pad_h = pad[0], g.pad_w = pad[1];
    if (g.kernel_h > g.H + 2 * g.pad_h || g.kernel_w > g.W + 2 * g.pad_w) {
      fail_at_key(spec_, spec_.node->has("kernel_size") ? "kernel_size" : "kernel_h",
                  std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) +
                      " is larger than the padded input " + std::to_string(g.H + 2 * g.pad_h) +
                      "x" + std::to_string(g.W + 2 * g.pad_w));
    }
    g.P = kernels::pool2d_output_extent(g.H, g.kernel_h, g.stride_h, g.pad_h, ceil_);
    g.Q = kernels::pool2d_output_extent(g.W, g.kernel_w, g.stride_w, g.pad_w, ceil_);
    g.count_include_pad = count_include_pad_;
    return g;
  }

  // Whether the keys allow a 2-D input: global pooling, or no key with a list of other than 2.
  bool spatial_2d() const {
    if (global_) return true;
    for (const SpatialSize* size : {&kernel_, &stride_, &pad_}) {
      if (!size->every_axis && size->values.size() != 2) return false;
    }
    return true;
  }

  kernels::AdaptivePool2dGeometry adaptive_geometry() const {
    const auto& g = geometry_;
    return {g.N, g.C, g.H, g.W, g.P, g.Q};
  }

  kernels::PoolMode mode_ = kernels::PoolMode::max;
  bool global_ = false, ceil_ = true, count_include_pad_ = true;
  bool adaptive_ = false;      // output_size given
  bool run_adaptive_ = false;  // for the current input: the adaptive kernels (else pool2d)
  int64_t output_h_ = 0, output_w_ = 0;
  SpatialSize kernel_, stride_, pad_;   // absent with global_pooling and output_size
  kernels::Pool2dGeometry geometry_{};  // 4-D inputs
  kernels::PoolNdGeometry nd_{};        // 3-D and 5-D inputs (rank 2: a 4-D input)
  Tensor argmax_;                       // [N,C,P,Q] when max pooling has no second top
};

}  // namespace

void register_pooling(LayerRegistry& registry) {
  registry.add<PoolingLayer>("Pooling");
}

}  // namespace crema
