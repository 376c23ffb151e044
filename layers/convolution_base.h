// What Convolution and Deconvolution share: their keys (ConvolutionKeys), their algorithm
// requests (ConvAlgorithms), and setup, reshape, forward and backward, which differ only in the
// shapes each layer names (its weights, the channels they expect of x, its output), in the
// geometry of the convolution it runs (Deconvolution's maps its output back to its input) and in
// the three Tensor-level calls that run its passes (ConvPasses). Convolution takes 1 to 3 spatial
// axes ([N, C, L], [N, C, H, W], [N, C, D, H, W]); Deconvolution 2.
//
// The weights the kernels read. The master weight is f32 [K, C/G, R, S] KCRS in every precision
// (checkpoints, PyTorch's names, the solver). A channels-last or 16-bit bottom (what the Net's
// precision pass hands a layer that runs it: core/net_precision.h) is convolved with a compute
// copy in the bottom's dtype and layout (nhwc: KRSC), refreshed from the master at each forward
// (kernels::convert); backward sums the filter gradient into a zeroed scratch of the master
// gradient's dtype in that layout (the tensor cores accumulate fp32) and adds it into the master
// gradient (kernels::convert, accumulate). Both are made at reshape: the copy is the layer's
// state (read by forward and backward); the scratch is its backward_scratch(), which the Net's
// memory plan places in the arena for that layer's backward alone, so that all layers' scratches
// share bytes with each other and with values dead by then (ResNet-50 bf16: 90 MiB of f32
// scratches fit in bytes the arena holds anyway). The bias
// and its gradient stay f32 [K] and are used as they are. An f32 (or f64) nchw bottom reads the
// master itself.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/convolution/convolution.h"
#include "kernels/convolution/convolution_nd.h"
#include "kernels/layout/layout.h"
#include "layers/conv_algorithms.h"
#include "layers/weighted_layer.h"

namespace crema {

// The Tensor-level calls of a layer's three passes (kernels/convolution/convolution_nd.h,
// convolution.h): y from x, the parameter gradients dw and db (each null when frozen or absent:
// not computed), and dx.
struct ConvPasses {
  void (*forward)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x, const Tensor& w,
                  const Tensor* b, Tensor& y, const kernels::ConvRequest& request);
  void (*backward_weights)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& x,
                           const Tensor& dy, Tensor* dw, Tensor* db,
                           const kernels::ConvRequest& request);
  void (*backward_data)(Context& ctx, const kernels::ConvNdGeometry& g, const Tensor& dy,
                        const Tensor& w, Tensor& dx, const kernels::ConvRequest& request);
};

class ConvolutionBase : public WeightedLayer {
 public:
  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = input(bottom);
    keys_.check_groups(spec_, x.dim(1), keys_.num_output);
    algorithms_.check(spec_, geometry(x));
    create_weight_and_bias(weight_shape(x), keys_.num_output, ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = input(bottom);
    if (x.dim(1) != expected_channels()) {
      fail("input has " + std::to_string(x.dim(1)) + " channels, the weights expect " +
           std::to_string(expected_channels()));
    }
    const kernels::ConvNdGeometry g = geometry(x);
    algorithms_.check(spec_, g);
    top[0]->value.reshape(top_shape(g));
    make_compute_weight(x, ctx);
    name_nhwc_kernels(x, g, ctx);
    shaped_ = {g, x.dtype(), x.ndim() == 4 ? x.layout() : Layout::nchw, ctx.num_threads()};
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor* b = bias_term_ ? &bias().value : nullptr;
    if (compute_weight_.defined()) kernels::convert(ctx, weight().value, compute_weight_);
    if (const BlobWindow* window = top_window(0)) {  // y lies in a Concat's top (core/VIEWS.md)
      const kernels::Conv2dGeometry g = geometry(bottom[0]->value).as_2d();
      kernels::conv2d_forward_window(ctx, g, bottom[0]->value, kernel_weight(), b,
                                     image_window(*window, g, window->parent->value));
      return;
    }
    passes_.forward(ctx, geometry(bottom[0]->value), bottom[0]->value, kernel_weight(), b,
                    top[0]->value, algorithms_.request(ConvAlgorithms::forward));
  }

  // Frozen parameters (lr_mult 0) get no gradient; dx only where the input wants one.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const kernels::ConvNdGeometry g = geometry(bottom[0]->value);
    const Tensor& dy = top[0]->grad;
    Tensor* dw = weight_grad();
    Tensor* db = bias_grad();
    // With a compute copy the filter gradient goes through the scratch (frozen: neither).
    Tensor* kernel_dw = dw != nullptr && compute_weight_.defined() ? &weight_grad_scratch_ : dw;
    if (kernel_dw != dw) ctx.fill(*kernel_dw, 0.0f);
    if (const BlobWindow* window = top_window(0)) {  // dy lies in a Concat's top's gradient
      const kernels::Conv2dGeometry g2 = g.as_2d();
      const kernels::ImageWindow dy_window = image_window(*window, g2, window->parent->grad);
      if (dw != nullptr || db != nullptr) {
        kernels::conv2d_backward_weights_window(ctx, g2, bottom[0]->value, dy_window, dw, db);
      }
      if (propagate_down[0]) {
        kernels::conv2d_backward_data_window(ctx, g2, dy_window, kernel_weight(), bottom[0]->grad);
      }
      return;
    }
    if (dw != nullptr || db != nullptr) {
      passes_.backward_weights(ctx, g, bottom[0]->value, dy, kernel_dw, db,
                               algorithms_.request(ConvAlgorithms::backward_filter));
    }
    if (kernel_dw != dw) kernels::convert(ctx, *kernel_dw, *dw, /*accumulate=*/true);
    if (propagate_down[0]) {
      passes_.backward_data(ctx, g, dy, kernel_weight(), bottom[0]->grad,
                            algorithms_.request(ConvAlgorithms::backward_data));
    }
  }

  // dL/dw reads x; dL/dx reads only dL/dy and the weights.
  BackwardReads backward_reads() const override { return {true, false}; }

  // A 2-D Convolution's passes as kernels::conv2d_workspace_bytes counts them (Deconvolution and
  // 3-D convolutions: not estimated, 0).
  int64_t workspace_bytes(const Device& device, bool backward, bool bottom_grad) const override {
    if (!shaped_ || transposed_ || shaped_->g.rank != 2) return 0;
    const kernels::Conv2dGeometry g = shaped_->g.as_2d();
    const auto pass_bytes = [&](ConvAlgorithms::Pass pass, bool with_bias) {
      return int64_t(kernels::conv2d_workspace_bytes(
          device, algorithms_.pass_of(pass), g, shaped_->dtype, shaped_->layout,
          algorithms_.planned_request(pass), with_bias, shaped_->threads));
    };
    const bool weight_grad = !params_[0].frozen();
    const bool bias_grad = bias_term_ && !params_[1].frozen();
    int64_t most = pass_bytes(ConvAlgorithms::forward, false);
    if (backward && (weight_grad || bias_grad)) {
      most = std::max(most, pass_bytes(ConvAlgorithms::backward_filter, bias_grad));
    }
    if (backward && bottom_grad) {
      most = std::max(most, pass_bytes(ConvAlgorithms::backward_data, false));
    }
    return most;
  }
  // The filter gradient's scratch is used within backward alone: the plan shares its bytes.
  Tensor* backward_scratch() override {
    return weight_grad_scratch_.defined() ? &weight_grad_scratch_ : nullptr;
  }

  // On CUDA in nhwc each pass has one kernel (kernels/convolution/convolution.h): "forward
  // tc_wgmma, backward_data tc_wgmma, backward_filter tc_implicit_gemm (bf16 nhwc)".
  std::string describe_algorithm() const override {
    return nhwc_kernels_.empty() ? algorithms_.describe() : nhwc_kernels_;
  }

  // ONNX's Conv (ConvTranspose for Deconvolution) with the same weights, padding on both sides;
  // N-d as ONNX's Conv is (one entry per spatial axis of the weights [K, C/G, spatial...]).
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    std::vector<std::string> inputs{io.bottom(0), g.weight(params_[0].name, params_[0].value)};
    if (bias_term_) inputs.push_back(g.weight(params_[1].name, params_[1].value));
    const int rank = params_[0].value.ndim() - 2;
    const std::string what = "the weights " + shape_str(params_[0].value.shape());
    auto per_axis = [&](const SpatialSize& size) {
      const std::array<int64_t, 3> v = size.for_rank(spec_, rank, what);
      return std::vector<int64_t>(v.begin(), v.begin() + rank);
    };
    std::vector<int64_t> pads = per_axis(keys_.pad);
    pads.insert(pads.end(), pads.begin(), pads.end());  // begins, then the same ends
    std::vector<GraphAttribute> attributes{{"kernel_shape", per_axis(keys_.kernel)},
                                           {"strides", per_axis(keys_.stride)},
                                           {"pads", pads},
                                           {"dilations", per_axis(keys_.dilation)},
                                           {"group", keys_.group}};
    const std::vector<int64_t> output_padding = onnx_output_padding();
    if (!output_padding.empty()) attributes.emplace_back("output_padding", output_padding);
    g.node(output_padding.empty() ? "Conv" : "ConvTranspose", inputs, {io.top(0)}, attributes);
  }

 protected:
  ConvolutionBase(const LayerSpec& spec, bool transposed, const ConvPasses& passes)
      : WeightedLayer(spec),
        keys_(spec),
        algorithms_(spec, transposed),
        passes_(passes),
        transposed_(transposed) {}

  // The geometry of the convolution the layer runs for input x.
  virtual kernels::ConvNdGeometry geometry(const Tensor& x) const = 0;
  // The weights' shape for input x (setup), and the input channels they expect (reshape).
  virtual Shape weight_shape(const Tensor& x) const = 0;
  virtual int64_t expected_channels() = 0;
  // The output's shape.
  virtual Shape top_shape(const kernels::ConvNdGeometry& g) const = 0;
  // The exported form: Convolution none (ONNX's Conv), Deconvolution its output_padding [h, w]
  // (ConvTranspose).
  virtual std::vector<int64_t> onnx_output_padding() const { return {}; }

  ConvolutionKeys keys_;
  ConvAlgorithms algorithms_;

 private:
  ConvPasses passes_;
  bool transposed_;
  Tensor compute_weight_;       // the bottom's dtype and layout; undefined: the master is read
  Tensor weight_grad_scratch_;  // the master gradient's dtype, compute_weight_'s layout
  std::string nhwc_kernels_;    // what describe_algorithm says on CUDA in nhwc
  // The last reshape's geometry and input format, for workspace_bytes.
  struct Shaped {
    kernels::ConvNdGeometry g;
    DType dtype;
    Layout layout;
    int threads;
  };
  std::optional<Shaped> shaped_;

  // The compute copy and the gradient scratch, when the 4-D bottom x is nhwc or x is 16-bit,
  // made at the first reshape (the Net's setup; the Net counts the copy as the layer's state and
  // plans the scratch) and again only when x's dtype or layout changes.
  void make_compute_weight(const Tensor& x, Context& ctx) {
    const bool nhwc = x.ndim() == 4 && x.layout() == Layout::nhwc;
    const bool copy = nhwc || (x.dtype() != DType::f32 && x.dtype() != DType::f64);
    const Layout layout = nhwc ? Layout::nhwc : Layout::nchw;
    if (!copy) {
      compute_weight_ = weight_grad_scratch_ = Tensor();
      return;
    }
    if (compute_weight_.defined() && compute_weight_.dtype() == x.dtype() &&
        compute_weight_.layout() == layout) {
      return;
    }
    const Shape& shape = weight().value.shape();
    compute_weight_ = ctx.empty(shape, x.dtype());
    compute_weight_.set_layout(layout);
    weight_grad_scratch_ = Tensor();
    if (weight_grad() != nullptr) {
      weight_grad_scratch_ = make_scratch(shape, kernels::conv_parameter_dtype(x.dtype()), ctx);
      weight_grad_scratch_.set_layout(layout);
    }
  }
  // What describe_algorithm says on CUDA in nhwc, for the geometry of this reshape (a
  // Convolution's passes: Deconvolution runs nchw only).
  void name_nhwc_kernels(const Tensor& x, const kernels::ConvNdGeometry& g, const Context& ctx) {
    nhwc_kernels_.clear();
    if (transposed_ || !ctx.device().is_cuda() || x.ndim() != 4 || x.layout() != Layout::nhwc) {
      return;
    }
    const kernels::Conv2dGeometry g2 = g.as_2d();
    using kernels::ConvPass;
    for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
      nhwc_kernels_ += std::string(nhwc_kernels_.empty() ? "" : ", ") +
                       kernels::conv_pass_name(pass) + " " +
                       kernels::conv2d_nhwc_kernel(pass, g2, x.dtype(), algorithms_.math());
    }
    nhwc_kernels_ += std::string(" (") + dtype_name(x.dtype()) + " nhwc)";
    if (x.dtype() == DType::f32) nhwc_kernels_ += algorithms_.describe_math();
  }
  // A top window as the kernels take it: the images of y (or dy) inside `parent`.
  static kernels::ImageWindow image_window(const BlobWindow& window,
                                           const kernels::Conv2dGeometry& g, Tensor& parent) {
    const int64_t image = g.K * g.P() * g.Q();
    return {&parent, window.offset, window.outer == 1 ? image : window.outer_stride};
  }
  const Tensor& kernel_weight() {
    return compute_weight_.defined() ? compute_weight_ : weight().value;
  }

  const Tensor& input(const std::vector<Blob*>& bottom) const {
    const Tensor& x = bottom[0]->value;
    if (transposed_ && x.ndim() != 4) {
      fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    }
    if (x.ndim() < 3 || x.ndim() > 5) {
      fail("expects a 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W] input, got " +
           shape_str(x.shape()));
    }
    return x;
  }
};

}  // namespace crema
