// Convolution: y = w * x + b, Caffe's (and cuDNN's) cross-correlation.
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g*C/G + c, p*stride_h - pad_h + r*dilation_h,
//                                                             q*stride_w - pad_w + s*dilation_w]
//   x [N,C,H,W] -> y [N,K,P,Q], w [K, C/G, R, S], b [K]; G = group, g = the group of k;
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1, likewise Q.
//
// YAML keys (defaults): num_output (required), kernel_size (required; n or [R, S], or Caffe's
//   kernel_h + kernel_w), stride (1; or stride_h + stride_w), pad (0; or pad_h + pad_w),
//   dilation (1) -- each n or [h, w] --, group (1; C and K must be multiples: group = C = K is a
//   depthwise convolution), and the weight and bias keys of WeightedLayer (weighted_layer.h):
//   bias_term, weight_filler, bias_filler, param (lr_mult 0 freezes a parameter: no gradient),
//   algorithm (auto; or find, or an algorithm's name, for all passes or per pass:
//   layers/conv_algorithms.h), workspace_limit (the net's model.workspace_limit), and math (the
//   net's model.math, itself fp32 by default; or tf32 or bf16: tensor-core products with fp32
//   accumulation on a GPU where the pass's version has them, fp32 on the CPU).
// From LeCun et al. 1998 (LeNet); the layout and keys are Caffe's. The kernels pick a path per
// geometry (1x1 filters with stride 1 and no padding are plain GEMMs; depthwise convolutions run
// direct loops on the GPU): kernels/convolution/README.md.
#include "kernels/convolution/convolution.h"
#include "layers/convolution_base.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// dL/db[k] += sum_{n,p,q} dy[n,k,p,q]; dL/dw += correlation of x with dy. With the weights
// frozen the bias gradient runs alone.
void backward_weights(Context& ctx, const kernels::Conv2dGeometry& g, const Tensor& x,
                      const Tensor& dy, Tensor* dw, Tensor* db,
                      const kernels::ConvRequest& request) {
  if (dw != nullptr) {
    kernels::conv2d_backward_weights(ctx, g, x, dy, *dw, db, request);
  } else {
    kernels::conv2d_backward_bias(ctx, g, dy, *db);
  }
}

// dL/dx = the transposed convolution of dy with w: each input pixel gathers every output it fed.
constexpr ConvPasses kPasses{kernels::conv2d_forward, backward_weights,
                             kernels::conv2d_backward_data};

class ConvolutionLayer final : public ConvolutionBase {
 public:
  explicit ConvolutionLayer(const LayerSpec& spec) : ConvolutionBase(spec, false, kPasses) {}

 private:
  kernels::Conv2dGeometry geometry(const Tensor& x) const override {
    return keys_.geometry(x.dim(0), x.dim(1), x.dim(2), x.dim(3), keys_.num_output);
  }
  Shape weight_shape(const Tensor& x) const override {
    return {keys_.num_output, x.dim(1) / keys_.group, keys_.kernel_h, keys_.kernel_w};
  }
  int64_t expected_channels() override { return weight().value.dim(1) * keys_.group; }
  Shape top_shape(const kernels::Conv2dGeometry& g) const override { return g.y_shape(); }
};

}  // namespace

void register_convolution(LayerRegistry& registry) {
  registry.add<ConvolutionLayer>("Convolution");
}

}  // namespace crema
