// Convolution: y = w * x + b, Caffe's (and cuDNN's) cross-correlation.
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g*C/G + c, p*stride_h - pad_h + r*dilation_h,
//                                                             q*stride_w - pad_w + s*dilation_w]
//   x [N,C,H,W] -> y [N,K,P,Q], w [K, C/G, R, S], b [K]; G = group, g = the group of k;
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1, likewise Q.
//
// YAML keys (defaults): num_output (required), kernel_size (required; n or [R, S]),
//   stride (1), pad (0), dilation (1) -- each n or [h, w] --, group (1), and the weight and bias
//   keys of WeightedLayer (weighted_layer.h): bias_term, weight_filler, bias_filler, param.
// From LeCun et al. 1998 (LeNet); the layout and keys are Caffe's.
#include "kernels/convolution/convolution.h"
#include "layers/layer_keys.h"
#include "layers/register_layers.h"
#include "layers/weighted_layer.h"

namespace crema {
namespace {

class ConvolutionLayer final : public WeightedLayer {
 public:
  explicit ConvolutionLayer(const LayerSpec& spec) : WeightedLayer(spec) {
    const ConfigNode& node = *spec.node;
    num_output_ = node.get<int64_t>("num_output");
    std::tie(kernel_h_, kernel_w_) = read_hw(node, "kernel_size");
    std::tie(stride_h_, stride_w_) = read_hw(node, "stride", {1, 1});
    std::tie(pad_h_, pad_w_) = read_hw(node, "pad", {0, 0});
    std::tie(dilation_h_, dilation_w_) = read_hw(node, "dilation", {1, 1});
    group_ = node.get<int64_t>("group", 1);
    if (num_output_ <= 0) node.at("num_output").fail("num_output must be positive");
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 4) fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    geometry(x).validate("layer '" + name() + "'");
    create_weight_and_bias({num_output_, x.dim(1) / group_, kernel_h_, kernel_w_}, num_output_,
                           ctx);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 4) fail("expects a 4-D input [N, C, H, W], got " + shape_str(x.shape()));
    if (x.dim(1) / group_ != weight().value.dim(1)) {
      fail("input has " + std::to_string(x.dim(1)) + " channels, the weights expect " +
           std::to_string(weight().value.dim(1) * group_));
    }
    const kernels::Conv2dGeometry g = geometry(x);
    g.validate("layer '" + name() + "'");
    top[0]->value.reshape({g.N, g.K, g.P(), g.Q()});
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor* b = bias_term_ ? &bias().value : nullptr;
    kernels::conv2d_forward(ctx, geometry(bottom[0]->value), bottom[0]->value, weight().value, b,
                            top[0]->value);
  }

  // dL/db[k] = sum_{n,p,q} dy[n,k,p,q]; dL/dw = correlation of x with dy; dL/dx = the
  // transposed convolution of dy with w (each input pixel gathers every output it fed).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const kernels::Conv2dGeometry g = geometry(bottom[0]->value);
    const Tensor& dy = top[0]->grad;
    kernels::conv2d_backward_weights(ctx, g, bottom[0]->value, dy, weight().grad,
                                     bias_term_ ? &bias().grad : nullptr);
    if (propagate_down[0])
      kernels::conv2d_backward_data(ctx, g, dy, weight().value, bottom[0]->grad);
  }

 private:
  kernels::Conv2dGeometry geometry(const Tensor& x) const {
    kernels::Conv2dGeometry g;
    g.N = x.dim(0), g.C = x.dim(1), g.H = x.dim(2), g.W = x.dim(3);
    g.K = num_output_, g.R = kernel_h_, g.S = kernel_w_;
    g.pad_h = pad_h_, g.pad_w = pad_w_, g.stride_h = stride_h_, g.stride_w = stride_w_;
    g.dilation_h = dilation_h_, g.dilation_w = dilation_w_, g.groups = group_;
    return g;
  }

  int64_t num_output_, kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_;
  int64_t dilation_h_, dilation_w_, group_;
};

}  // namespace

void register_convolution(LayerRegistry& registry) {
  registry.add<ConvolutionLayer>("Convolution");
}

}  // namespace crema
