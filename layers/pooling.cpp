// Pooling: the maximum or the average of each kernel_h x kernel_w window.
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
//   pad_h + pad_w) -- each n or [h, w] --, global_pooling (false: true pools each whole plane to
//   1x1 and takes no kernel, stride or pad), round_mode (ceil | floor), count_include_pad (true;
//   average pooling only), output_size (none; n or [h, w]: adaptive pooling, below).
//
// Adaptive pooling (PyTorch's AdaptiveAvgPool2d / AdaptiveMaxPool2d): with output_size: [P, Q]
// the output is [N, C, P, Q] whatever H and W, output (p, q) pooling rows
// [floor(p*H/P), ceil((p+1)*H/P)) and columns likewise (kernels/pooling/adaptive_pooling.h). It
// takes no kernel, stride, pad, global_pooling, round_mode or count_include_pad. Where P divides
// H and Q divides W those windows are a fixed kernel = stride = H/P, W/Q, and the layer runs the
// fixed-window kernels (output_size 1 is global pooling); otherwise the adaptive ones.
#include <algorithm>
#include <tuple>

#include "kernels/pooling/adaptive_pooling.h"
#include "kernels/pooling/pooling.h"
#include "layers/key_error.h"
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
      std::tie(kernel_h_, kernel_w_) = read_spatial(spec, "kernel_size", "kernel", std::nullopt, 1);
      std::tie(stride_h_, stride_w_) =
          read_spatial(spec, "stride", "stride", std::pair<int64_t, int64_t>{1, 1}, 1);
      std::tie(pad_h_, pad_w_) =
          read_spatial(spec, "pad", "pad", std::pair<int64_t, int64_t>{0, 0}, 0);
      if (pad_h_ >= kernel_h_ || pad_w_ >= kernel_w_) {
        fail_at_key(spec,
                    node.has("pad")       ? "pad"
                    : pad_h_ >= kernel_h_ ? "pad_h"
                                          : "pad_w",
                    "must be smaller than the kernel " + std::to_string(kernel_h_) + "x" +
                        std::to_string(kernel_w_));
      }
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

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    geometry_ = geometry(bottom[0]->value);
    if (!argmax_.defined()) argmax_ = ctx.empty({0}, bottom[0]->value.dtype());
    const auto& g = geometry_;
    top[0]->value.reshape({g.N, g.C, g.P, g.Q});
    if (top.size() > 1) {
      top[1]->value.reshape({g.N, g.C, g.P, g.Q});
    } else if (mode_ == kernels::PoolMode::max) {
      argmax_.reshape({g.N, g.C, g.P, g.Q});
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (run_adaptive_) {
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
    if (run_adaptive_) {
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
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (io.tops.size() > 1) fail("the argmax top has no ONNX form; export without it");
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

  kernels::Pool2dGeometry geometry(const Tensor& x) {
    if (x.ndim() != 4) fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
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
    g.kernel_h = global_ ? g.H : kernel_h_;
    g.kernel_w = global_ ? g.W : kernel_w_;
    g.stride_h = stride_h_, g.stride_w = stride_w_, g.pad_h = pad_h_, g.pad_w = pad_w_;
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

  kernels::AdaptivePool2dGeometry adaptive_geometry() const {
    const auto& g = geometry_;
    return {g.N, g.C, g.H, g.W, g.P, g.Q};
  }

  kernels::PoolMode mode_ = kernels::PoolMode::max;
  bool global_ = false, ceil_ = true, count_include_pad_ = true;
  bool adaptive_ = false;      // output_size given
  bool run_adaptive_ = false;  // for the current input: the adaptive kernels (else pool2d)
  int64_t output_h_ = 0, output_w_ = 0;
  int64_t kernel_h_ = 0, kernel_w_ = 0, stride_h_ = 1, stride_w_ = 1, pad_h_ = 0, pad_w_ = 0;
  kernels::Pool2dGeometry geometry_{};
  Tensor argmax_;  // [N,C,P,Q] when max pooling has no second top
};

}  // namespace

void register_pooling(LayerRegistry& registry) {
  registry.add<PoolingLayer>("Pooling");
}

}  // namespace crema
